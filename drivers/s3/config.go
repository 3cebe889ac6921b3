package s3

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
	"github.com/stratastream/strata/internal/redact"
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
	// Retry bounds the retries of transient failures: 5xx, 429/SlowDown,
	// RequestTimeout, 409 conflicts, network errors and request timeouts.
	// Backoff is exponential with full jitter between BaseDelay (the first
	// backoff ceiling) and MaxDelay; MaxAttempts counts tries per
	// operation.
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

// Timeouts bound the driver's waits (connect, request: one HTTP request,
// body included; operation: one Storage call with its retries).
type Timeouts = driverconfig.Timeouts

// Retry bounds the retries of transient failures.
type Retry = driverconfig.Retry

// Engine tunes the chunked engine the driver runs on.
type Engine = driverconfig.Engine

// Defaults of Config.
const (
	DefaultRegion           = "us-east-1"
	DefaultConnectTimeout   = driverconfig.DefaultConnectTimeout
	DefaultRequestTimeout   = driverconfig.DefaultRequestTimeout
	DefaultOperationTimeout = driverconfig.DefaultOperationTimeout
	DefaultMaxAttempts      = driverconfig.DefaultMaxAttempts
	DefaultBaseDelay        = driverconfig.DefaultBaseDelay
	DefaultMaxDelay         = driverconfig.DefaultMaxDelay
)

// ParseConfig reads a Config from YAML, JSON, or an s3:// URL, and
// validates it (Validate). Unknown fields are an error, so a misspelt
// setting is not silently ignored.
//
// The URL form is s3://BUCKET/PREFIX?region=R&endpoint=URL&path_style=true
// &request_timeout=30s&operation_timeout=60s&connect_timeout=5s
// &max_attempts=5&base_delay=50ms&max_delay=2s&linger=5ms
// &max_chunk_bytes=N&max_inflight_chunks=N&max_batch_bytes=N
// &cache_bytes=N;
// credentials then come from the SDK's default chain.
func ParseConfig(data []byte) (Config, error) {
	return driverconfig.Parse(DriverName, "s3", data, fromURL, Config.Validate)
}

// fromURL reads the s3:// form documented on ParseConfig.
func fromURL(u *url.URL) (Config, error) {
	c := Config{Bucket: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	p := driverconfig.Params{
		"region":     driverconfig.String(&c.Region),
		"endpoint":   driverconfig.String(&c.Endpoint),
		"path_style": driverconfig.Bool(&c.PathStyle),
	}
	driverconfig.SectionParams(p, &c.Timeouts, &c.Retry, &c.Engine)
	if err := p.Apply(DriverName, u.Query()); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks every field and names the first bad one in an error that
// wraps stream.ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return driverconfig.Invalid(DriverName, field, format, args...)
	}
	if c.Bucket == "" {
		return bad("bucket", "required")
	}
	if err := validBucket(c.Bucket); err != nil {
		return bad("bucket", "%q: %v", c.Bucket, err)
	}
	if err := driverconfig.CheckPrefix(DriverName, "prefix", c.Prefix); err != nil {
		return err
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("endpoint", "%q is not an http:// or https:// URL", redact.URL(c.Endpoint))
		}
	}
	if (c.Credentials.AccessKeyID == "") != (c.Credentials.SecretAccessKey == "") {
		return bad("credentials", "access_key_id and secret_access_key must be set together")
	}
	if c.Credentials.SessionToken != "" && c.Credentials.AccessKeyID == "" {
		return bad("credentials.session_token", "needs access_key_id and secret_access_key")
	}
	return driverconfig.ValidateSections(DriverName, &c.Timeouts, &c.Retry, &c.Engine)
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
	c.Prefix = driverconfig.DirPrefix(c.Prefix)
	c.Timeouts = c.Timeouts.WithDefaults()
	c.Retry = c.Retry.WithDefaults()
	return c
}
