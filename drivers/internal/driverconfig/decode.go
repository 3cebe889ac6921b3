package driverconfig

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stratastream/strata/internal/yamlconf"
	"github.com/stratastream/strata/stream"
)

// Invalid is the error for a bad config field: it wraps
// stream.ErrInvalidArgument and reads "DRIVER config: FIELD: MESSAGE".
func Invalid(driver, field, format string, args ...any) error {
	return fmt.Errorf("%w: %s config: %s: %s", stream.ErrInvalidArgument, driver, field, fmt.Sprintf(format, args...))
}

// Decode reads a config document into a C: a URL when scheme is not "" and
// the document (trimmed) starts with scheme + "://", parsed by fromURL;
// otherwise YAML or JSON, decoded strictly (an unknown field is an error,
// so a misspelt setting is not silently ignored). Errors wrap
// stream.ErrInvalidArgument and name the driver. Decode neither applies
// defaults nor validates.
func Decode[C any](driver, scheme string, data []byte, fromURL func(*url.URL) (C, error)) (C, error) {
	var c C
	text := bytes.TrimSpace(data)
	if scheme != "" && bytes.HasPrefix(text, []byte(scheme+"://")) {
		u, err := url.Parse(string(text))
		if err != nil {
			return c, fmt.Errorf("%w: %s config URL: %v", stream.ErrInvalidArgument, driver, err)
		}
		return fromURL(u)
	}
	if err := DecodeYAML(driver, data, &c); err != nil {
		var zero C
		return zero, err
	}
	return c, nil
}

// Parse is Decode followed by validate: a driver's ParseConfig.
func Parse[C any](driver, scheme string, data []byte, fromURL func(*url.URL) (C, error), validate func(C) error) (C, error) {
	c, err := Decode(driver, scheme, data, fromURL)
	if err == nil {
		err = validate(c)
	}
	if err != nil {
		var zero C
		return zero, err
	}
	return c, nil
}

// DecodeYAML decodes a YAML or JSON document into v strictly: an unknown
// field is an error, and no config value (it may be a secret) is quoted in
// an error. Errors wrap stream.ErrInvalidArgument and read
// "DRIVER config: ...".
func DecodeYAML(driver string, data []byte, v any) error {
	if err := yamlconf.Decode(data, v); err != nil {
		return fmt.Errorf("%w: %s config: %v", stream.ErrInvalidArgument, driver, err)
	}
	return nil
}

// Params are the query parameters a config URL accepts: each name's setter
// parses the value into its field.
type Params map[string]func(value string) error

// Apply sets the parameters of q (the last value of a repeated one). An
// unknown parameter or a bad value is an error that wraps
// stream.ErrInvalidArgument and names the parameter.
func (p Params) Apply(driver string, q url.Values) error {
	for k, vs := range q {
		set, ok := p[k]
		err := fmt.Errorf("unknown parameter")
		if ok {
			err = set(vs[len(vs)-1])
		}
		if err != nil {
			return fmt.Errorf("%w: %s config URL: parameter %s: %v", stream.ErrInvalidArgument, driver, k, err)
		}
	}
	return nil
}

// String is a Params setter for a string field.
func String(p *string) func(string) error {
	return func(v string) error { *p = v; return nil }
}

// Bool is a Params setter for a bool field (strconv.ParseBool).
func Bool(p *bool) func(string) error {
	return func(v string) (err error) { *p, err = strconv.ParseBool(v); return err }
}

// Int is a Params setter for an int field.
func Int(p *int) func(string) error {
	return func(v string) (err error) { *p, err = strconv.Atoi(v); return err }
}

// Int64 is a Params setter for an int64 field.
func Int64(p *int64) func(string) error {
	return func(v string) (err error) { *p, err = strconv.ParseInt(v, 10, 64); return err }
}

// Duration is a Params setter for a time.Duration field ("5s").
func Duration(p *time.Duration) func(string) error {
	return func(v string) (err error) { *p, err = time.ParseDuration(v); return err }
}

// SectionParams returns p with the parameters of the shared sections
// added (see the AddParams methods); a nil section is not in the config.
func SectionParams(p Params, t *Timeouts, r *Retry, e *Engine) Params {
	if t != nil {
		t.AddParams(p)
	}
	if r != nil {
		r.AddParams(p)
	}
	if e != nil {
		e.AddParams(p)
	}
	return p
}

// AddParams adds connect_timeout, request_timeout and operation_timeout,
// which set t's fields.
func (t *Timeouts) AddParams(p Params) {
	p["connect_timeout"] = Duration(&t.Connect)
	p["request_timeout"] = Duration(&t.Request)
	p["operation_timeout"] = Duration(&t.Operation)
}

// AddParams adds max_attempts, base_delay and max_delay, which set r's
// fields.
func (r *Retry) AddParams(p Params) {
	p["max_attempts"] = Int(&r.MaxAttempts)
	p["base_delay"] = Duration(&r.BaseDelay)
	p["max_delay"] = Duration(&r.MaxDelay)
}

// AddParams adds linger, max_chunk_bytes, max_inflight_chunks,
// max_batch_bytes and cache_bytes, which set e's fields.
func (e *Engine) AddParams(p Params) {
	p["linger"] = Duration(&e.Linger)
	p["max_chunk_bytes"] = Int(&e.MaxChunkBytes)
	p["max_inflight_chunks"] = Int(&e.MaxInflightChunks)
	p["max_batch_bytes"] = Int(&e.MaxBatchBytes)
	p["cache_bytes"] = Int64(&e.CacheBytes)
}

// CheckPrefix checks a key prefix: "" or '/'-separated elements of
// [A-Za-z0-9._-], with or without a trailing '/'. The error is Invalid,
// naming field.
func CheckPrefix(driver, field, prefix string) error {
	if p := strings.TrimSuffix(prefix, "/"); p != "" {
		if err := stream.ValidateName(p); err != nil {
			return Invalid(driver, field, "%q must be '/'-separated elements of [A-Za-z0-9._-]", prefix)
		}
	}
	return nil
}

// DirPrefix returns a non-empty prefix with a trailing '/' ("a/b" gives
// "a/b/"), and "" as it is.
func DirPrefix(prefix string) string {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix
}
