package driverconfig

import (
	"time"

	"github.com/stratastream/strata/stream/chunked"
)

// Timeouts bound a driver's waits. An operation that runs out of time
// fails with stream.ErrUnavailable.
type Timeouts struct {
	// Connect bounds dialing the endpoint. Default 5s.
	Connect time.Duration `yaml:"connect"`
	// Request bounds one request (one try), body included. Default 30s.
	Request time.Duration `yaml:"request"`
	// Operation bounds one Storage call with all its retries. Default 60s.
	Operation time.Duration `yaml:"operation"`
}

// Retry is the policy for transient failures; which failures are transient
// is the driver's (see its Config.Retry). Backoff is exponential with
// jitter between BaseDelay and MaxDelay.
type Retry struct {
	// MaxAttempts is the number of tries per request, the first included.
	// Default 5; 1 disables retries.
	MaxAttempts int `yaml:"max_attempts"`
	// BaseDelay is the first backoff. Default 50ms.
	BaseDelay time.Duration `yaml:"base_delay"`
	// MaxDelay caps one backoff. Default 2s.
	MaxDelay time.Duration `yaml:"max_delay"`
}

// Engine tunes the chunked engine a driver runs on (group commit and
// pipelining). Zero values take the engine's defaults.
type Engine struct {
	// Linger is how long an append may wait for others to share its chunk
	// (chunked.Options.Linger).
	Linger time.Duration `yaml:"linger"`
	// MaxChunkBytes caps the payload of one chunk object
	// (chunked.Options.MaxChunkBytes).
	MaxChunkBytes int `yaml:"max_chunk_bytes"`
	// MaxInflightChunks caps the chunk puts in flight per stream
	// (chunked.Options.MaxInflightChunks).
	MaxInflightChunks int `yaml:"max_inflight_chunks"`
	// MaxBatchBytes is the largest batch accepted
	// (chunked.Options.MaxBatchBytes; 0: stream.DefaultMaxBatchBytes).
	MaxBatchBytes int `yaml:"max_batch_bytes"`
	// CacheBytes sizes each stream's read cache of recent chunks
	// (chunked.Options.CacheBytes); negative disables it.
	CacheBytes int64 `yaml:"cache_bytes"`
}

// Defaults of Timeouts and Retry.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultRequestTimeout   = 30 * time.Second
	DefaultOperationTimeout = 60 * time.Second
	DefaultMaxAttempts      = 5
	DefaultBaseDelay        = 50 * time.Millisecond
	DefaultMaxDelay         = 2 * time.Second
)

// MaxAttempts is the most Retry.MaxAttempts may be.
const MaxAttempts = 100

// WithDefaults returns t with every zero field replaced by its default.
func (t Timeouts) WithDefaults() Timeouts {
	setDefault(&t.Connect, DefaultConnectTimeout)
	setDefault(&t.Request, DefaultRequestTimeout)
	setDefault(&t.Operation, DefaultOperationTimeout)
	return t
}

// WithDefaults returns r with every zero field replaced by its default.
func (r Retry) WithDefaults() Retry {
	setDefault(&r.MaxAttempts, DefaultMaxAttempts)
	setDefault(&r.BaseDelay, DefaultBaseDelay)
	setDefault(&r.MaxDelay, DefaultMaxDelay)
	return r
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// ValidateSections validates the shared sections of a config, in the
// order timeouts, retry, engine (whose fields sit under "engine."); a nil
// section is not in the config.
func ValidateSections(driver string, t *Timeouts, r *Retry, e *Engine) error {
	if t != nil {
		if err := t.Validate(driver); err != nil {
			return err
		}
	}
	if r != nil {
		if err := r.Validate(driver); err != nil {
			return err
		}
	}
	if e != nil {
		return e.Validate(driver, "engine.")
	}
	return nil
}

// Validate names the first negative field of t, as timeouts.FIELD.
func (t Timeouts) Validate(driver string) error {
	return nonNegative(driver, "timeouts.",
		field{"connect", t.Connect}, field{"request", t.Request}, field{"operation", t.Operation})
}

// Validate names the first bad field of r, as retry.FIELD: a negative one,
// or MaxAttempts above the MaxAttempts constant.
func (r Retry) Validate(driver string) error {
	if err := nonNegative(driver, "retry.",
		field{"max_attempts", r.MaxAttempts}, field{"base_delay", r.BaseDelay}, field{"max_delay", r.MaxDelay}); err != nil {
		return err
	}
	if r.MaxAttempts > MaxAttempts {
		return Invalid(driver, "retry.max_attempts", "%d is more than %d", r.MaxAttempts, MaxAttempts)
	}
	return nil
}

// Validate names the first negative field of e (CacheBytes may be
// negative) as prefix+FIELD: prefix is "engine." where the fields sit in an
// engine section, "" where they sit at the top of the config.
func (e Engine) Validate(driver, prefix string) error {
	return nonNegative(driver, prefix,
		field{"linger", e.Linger}, field{"max_chunk_bytes", e.MaxChunkBytes},
		field{"max_inflight_chunks", e.MaxInflightChunks}, field{"max_batch_bytes", e.MaxBatchBytes})
}

// Options maps e to the engine's options for the named driver. opTimeout
// bounds each Storage call (chunked.Options.OpTimeout; 0: the engine's
// default); a driver sets its other options (Logger, and what its Storage
// delivers: Durable, SharedNamespace) itself.
func (e Engine) Options(driver, version string, opTimeout time.Duration) chunked.Options {
	return chunked.Options{
		Driver:            driver,
		Version:           version,
		Linger:            e.Linger,
		MaxChunkBytes:     e.MaxChunkBytes,
		MaxInflightChunks: e.MaxInflightChunks,
		MaxBatchBytes:     e.MaxBatchBytes,
		CacheBytes:        e.CacheBytes,
		OpTimeout:         opTimeout,
	}
}

// field is a named int or time.Duration for nonNegative.
type field struct {
	name string
	v    any
}

// nonNegative names the first negative field, as prefix+name.
func nonNegative(driver, prefix string, fields ...field) error {
	for _, f := range fields {
		switch v := f.v.(type) {
		case time.Duration:
			if v < 0 {
				return Invalid(driver, prefix+f.name, "negative duration %v", v)
			}
		case int:
			if v < 0 {
				return Invalid(driver, prefix+f.name, "negative (%d)", v)
			}
		}
	}
	return nil
}
