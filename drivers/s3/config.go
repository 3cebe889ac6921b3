package s3

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/stream"
)

// Config configures the s3 driver. It is read from YAML or JSON (see
// ParseConfig) or from an s3:// URL. Zero values mean the documented
// defaults.
type Config struct {
	// Bucket holds all the driver's objects. Required.
	Bucket string `yaml:"bucket"`
	// Prefix is prepended to every key, so several stores can share a
	// bucket. "" or a path ending in '/' ("a/b" is read as "a/b/").
	Prefix string `yaml:"prefix"`
	// Region is the signing region. Default: the SDK's chain (AWS_REGION,
	// shared config), else "us-east-1".
	Region string `yaml:"region"`
	// Endpoint is the base URL of an S3-compatible service
	// (http://127.0.0.1:9000). Default: AWS's endpoint for Region.
	Endpoint string `yaml:"endpoint"`
	// PathStyle addresses buckets as ENDPOINT/BUCKET/KEY instead of
	// BUCKET.ENDPOINT/KEY. MinIO and most S3-compatibles want true.
	PathStyle bool `yaml:"path_style"`
	// Credentials are static keys. When AccessKeyID is empty the SDK's
	// default chain is used (environment, shared files, web identity, IMDS).
	Credentials Credentials `yaml:"credentials"`
	// Timeouts bound each request and each operation.
	Timeouts Timeouts `yaml:"timeouts"`
	// Retry bounds the retries of transient failures.
	Retry Retry `yaml:"retry"`
	// Engine tunes the chunked engine (group commit and pipelining).
	Engine Engine `yaml:"engine"`
}

// Credentials are static S3 keys. Never logged.
type Credentials struct {
	// AccessKeyID; empty selects the SDK's default credential chain.
	AccessKeyID string `yaml:"access_key_id"`
	// SecretAccessKey; required with AccessKeyID.
	SecretAccessKey string `yaml:"secret_access_key"`
	// SessionToken for temporary credentials; optional.
	SessionToken string `yaml:"session_token"`
}

// Timeouts bound the driver's waits. An operation that runs out of time
// fails with stream.ErrUnavailable.
type Timeouts struct {
	// Connect bounds dialing the endpoint. Default 5s.
	Connect time.Duration `yaml:"connect"`
	// Request bounds one HTTP request, body included. Default 30s.
	Request time.Duration `yaml:"request"`
	// Operation bounds one Storage call with all its retries. Default 60s.
	Operation time.Duration `yaml:"operation"`
}

// Retry is the policy for transient failures: 5xx, 429/SlowDown,
// RequestTimeout, 409 conflicts, network errors and request timeouts.
// Backoff is exponential with full jitter between BaseDelay and MaxDelay.
type Retry struct {
	// MaxAttempts is the number of tries per operation, the first
	// included. Default 5; 1 disables retries.
	MaxAttempts int `yaml:"max_attempts"`
	// BaseDelay is the first backoff ceiling. Default 50ms.
	BaseDelay time.Duration `yaml:"base_delay"`
	// MaxDelay caps one backoff. Default 2s.
	MaxDelay time.Duration `yaml:"max_delay"`
}

// Engine tunes the chunked engine the driver runs on. Zero values take the
// engine's defaults.
type Engine struct {
	// Linger is how long an append may wait for others to share its chunk.
	Linger time.Duration `yaml:"linger"`
	// MaxChunkBytes caps the payload of one chunk object.
	MaxChunkBytes int `yaml:"max_chunk_bytes"`
	// MaxInflightChunks caps the chunk PUTs in flight per stream.
	MaxInflightChunks int `yaml:"max_inflight_chunks"`
	// CacheBytes sizes each stream's read cache of recent chunks;
	// negative disables it.
	CacheBytes int64 `yaml:"cache_bytes"`
}

// Defaults of Config.
const (
	DefaultRegion           = "us-east-1"
	DefaultConnectTimeout   = 5 * time.Second
	DefaultRequestTimeout   = 30 * time.Second
	DefaultOperationTimeout = 60 * time.Second
	DefaultMaxAttempts      = 5
	DefaultBaseDelay        = 50 * time.Millisecond
	DefaultMaxDelay         = 2 * time.Second
)

// ParseConfig reads a Config from YAML, JSON, or an s3:// URL, and
// validates it (Validate). Unknown fields are an error, so a misspelt
// setting is not silently ignored.
//
// The URL form is s3://BUCKET/PREFIX?region=R&endpoint=URL&path_style=true
// &request_timeout=30s&operation_timeout=60s&connect_timeout=5s
// &max_attempts=5&linger=5ms&max_chunk_bytes=N&max_inflight_chunks=N;
// credentials then come from the SDK's default chain.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	text := bytes.TrimSpace(data)
	if bytes.HasPrefix(text, []byte("s3://")) {
		var err error
		if c, err = parseURL(string(text)); err != nil {
			return Config{}, err
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil {
			return Config{}, fmt.Errorf("%w: s3 config: %v", stream.ErrInvalidArgument, err)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseURL reads the s3:// form documented on ParseConfig.
func parseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("%w: s3 config URL: %v", stream.ErrInvalidArgument, err)
	}
	c := Config{Bucket: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	bad := func(k string, err error) error {
		return fmt.Errorf("%w: s3 config URL: parameter %s: %v", stream.ErrInvalidArgument, k, err)
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		var err error
		switch k {
		case "region":
			c.Region = v
		case "endpoint":
			c.Endpoint = v
		case "path_style":
			c.PathStyle, err = strconv.ParseBool(v)
		case "connect_timeout":
			c.Timeouts.Connect, err = time.ParseDuration(v)
		case "request_timeout":
			c.Timeouts.Request, err = time.ParseDuration(v)
		case "operation_timeout":
			c.Timeouts.Operation, err = time.ParseDuration(v)
		case "max_attempts":
			c.Retry.MaxAttempts, err = strconv.Atoi(v)
		case "linger":
			c.Engine.Linger, err = time.ParseDuration(v)
		case "max_chunk_bytes":
			c.Engine.MaxChunkBytes, err = strconv.Atoi(v)
		case "max_inflight_chunks":
			c.Engine.MaxInflightChunks, err = strconv.Atoi(v)
		default:
			err = fmt.Errorf("unknown parameter")
		}
		if err != nil {
			return Config{}, bad(k, err)
		}
	}
	return c, nil
}

// Validate checks every field and names the first bad one in an error that
// wraps stream.ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: s3 config: %s: %s", stream.ErrInvalidArgument, field, fmt.Sprintf(format, args...))
	}
	if c.Bucket == "" {
		return bad("bucket", "required")
	}
	if err := validBucket(c.Bucket); err != nil {
		return bad("bucket", "%q: %v", c.Bucket, err)
	}
	if p := strings.TrimSuffix(c.Prefix, "/"); p != "" {
		if err := stream.ValidateName(p); err != nil {
			return bad("prefix", "%q must be '/'-separated elements of [A-Za-z0-9._-]", c.Prefix)
		}
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("endpoint", "%q is not an http:// or https:// URL", c.Endpoint)
		}
	}
	if (c.Credentials.AccessKeyID == "") != (c.Credentials.SecretAccessKey == "") {
		return bad("credentials", "access_key_id and secret_access_key must be set together")
	}
	if c.Credentials.SessionToken != "" && c.Credentials.AccessKeyID == "" {
		return bad("credentials.session_token", "needs access_key_id and secret_access_key")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"timeouts.connect", c.Timeouts.Connect},
		{"timeouts.request", c.Timeouts.Request},
		{"timeouts.operation", c.Timeouts.Operation},
		{"retry.base_delay", c.Retry.BaseDelay},
		{"retry.max_delay", c.Retry.MaxDelay},
		{"engine.linger", c.Engine.Linger},
	} {
		if d.v < 0 {
			return bad(d.name, "negative duration %v", d.v)
		}
	}
	switch {
	case c.Retry.MaxAttempts < 0:
		return bad("retry.max_attempts", "negative (%d)", c.Retry.MaxAttempts)
	case c.Retry.MaxAttempts > 100:
		return bad("retry.max_attempts", "%d is more than 100", c.Retry.MaxAttempts)
	case c.Engine.MaxChunkBytes < 0:
		return bad("engine.max_chunk_bytes", "negative (%d)", c.Engine.MaxChunkBytes)
	case c.Engine.MaxInflightChunks < 0:
		return bad("engine.max_inflight_chunks", "negative (%d)", c.Engine.MaxInflightChunks)
	}
	return nil
}

// validBucket applies the S3 bucket naming rules that matter for
// addressing: 3-63 bytes of [a-z0-9.-], starting and ending alphanumeric.
func validBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("must be 3-63 bytes")
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("byte %q at %d is not in [a-z0-9.-]", c, i)
		}
	}
	if !isAlnum(b[0]) || !isAlnum(b[len(b)-1]) {
		return fmt.Errorf("must start and end with a letter or digit")
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// withDefaults returns c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	setDur := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	setDur(&c.Timeouts.Connect, DefaultConnectTimeout)
	setDur(&c.Timeouts.Request, DefaultRequestTimeout)
	setDur(&c.Timeouts.Operation, DefaultOperationTimeout)
	setDur(&c.Retry.BaseDelay, DefaultBaseDelay)
	setDur(&c.Retry.MaxDelay, DefaultMaxDelay)
	if c.Retry.MaxAttempts == 0 {
		c.Retry.MaxAttempts = DefaultMaxAttempts
	}
	return c
}
