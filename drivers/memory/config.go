package memory

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/stream"
)

// Config configures a memory Store.
type Config struct {
	// Namespace names a process-wide set of streams. Stores opened with the
	// same non-empty Namespace share streams; an empty Namespace gives the
	// store a private namespace.
	Namespace string `yaml:"namespace"`
	// MaxBatchBytes is the largest batch accepted (default
	// stream.DefaultMaxBatchBytes).
	MaxBatchBytes int `yaml:"max_batch_bytes"`
}

// ParseConfig parses a YAML or JSON config document. Unknown fields are an
// error; an empty document is the default config.
func ParseConfig(doc []byte) (Config, error) {
	var c Config
	if len(bytes.TrimSpace(doc)) == 0 {
		return c, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: memory driver config: %v", stream.ErrInvalidArgument, err)
	}
	if c.MaxBatchBytes < 0 {
		return c, fmt.Errorf("%w: memory driver config: max_batch_bytes must be >= 0, got %d", stream.ErrInvalidArgument, c.MaxBatchBytes)
	}
	return c, nil
}
