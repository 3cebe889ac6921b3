package azure

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/stream"
)

// Config configures the azure driver. It is read from YAML or JSON (see
// ParseConfig) or from an azblob:// URL. Zero values mean the documented
// defaults.
type Config struct {
	// AccountURL is the blob service endpoint:
	// https://ACCOUNT.blob.core.windows.net for Azure, or
	// http://127.0.0.1:10000/devstoreaccount1 for Azurite (path style).
	// Required unless Credentials.ConnectionString is set, which carries
	// its own endpoint.
	AccountURL string `yaml:"account_url"`
	// Container holds all the driver's blobs. It must exist. Required.
	Container string `yaml:"container"`
	// Prefix is prepended to every blob name, so several stores can share
	// a container. "" or a path ending in '/' ("a/b" is read as "a/b/").
	Prefix string `yaml:"prefix"`
	// Credentials choose how requests are authorised. At most one of
	// AccountKey, ConnectionString and SASToken may be set; none selects
	// azidentity's DefaultAzureCredential (environment, workload identity,
	// managed identity, Azure CLI).
	Credentials Credentials `yaml:"credentials"`
	// Timeouts bound each request and each operation.
	Timeouts Timeouts `yaml:"timeouts"`
	// Retry bounds the retries of transient failures.
	Retry Retry `yaml:"retry"`
	// Engine tunes the chunked engine (group commit and pipelining).
	Engine Engine `yaml:"engine"`
}

// Credentials authorise the driver's requests. Never logged.
type Credentials struct {
	// AccountName is the storage account, needed with AccountKey. Default:
	// taken from AccountURL (the host's first label for
	// ACCOUNT.blob.core.windows.net, the first path element for a
	// path-style URL such as Azurite's).
	AccountName string `yaml:"account_name"`
	// AccountKey is a base64 Shared Key of the account.
	AccountKey string `yaml:"account_key"`
	// ConnectionString is a full storage connection string
	// (DefaultEndpointsProtocol=...;AccountName=...;AccountKey=...;
	// BlobEndpoint=...), or one carrying a SharedAccessSignature.
	ConnectionString string `yaml:"connection_string"`
	// SASToken is a shared access signature (the query string, with or
	// without a leading '?') valid for the container: read, add, create,
	// write, delete and list.
	SASToken string `yaml:"sas_token"`
}

// Timeouts bound the driver's waits. An operation that runs out of time
// fails with stream.ErrUnavailable.
type Timeouts struct {
	// Connect bounds dialing the endpoint. Default 5s.
	Connect time.Duration `yaml:"connect"`
	// Request bounds one HTTP request (one try), body included. Default 30s.
	Request time.Duration `yaml:"request"`
	// Operation bounds one Storage call with all its retries. Default 60s.
	Operation time.Duration `yaml:"operation"`
}

// Retry is the policy for transient failures: 408, 429, 500, 502, 503,
// 504 and network errors or request timeouts. Backoff is exponential with
// jitter between BaseDelay and MaxDelay (the azcore retry policy); a
// Retry-After header from the service takes precedence.
type Retry struct {
	// MaxAttempts is the number of tries per request, the first included.
	// Default 5; 1 disables retries.
	MaxAttempts int `yaml:"max_attempts"`
	// BaseDelay is the first backoff. Default 50ms.
	BaseDelay time.Duration `yaml:"base_delay"`
	// MaxDelay caps one backoff. Default 2s.
	MaxDelay time.Duration `yaml:"max_delay"`
}

// Engine tunes the chunked engine the driver runs on. Zero values take the
// engine's defaults.
type Engine struct {
	// Linger is how long an append may wait for others to share its chunk.
	Linger time.Duration `yaml:"linger"`
	// MaxChunkBytes caps the payload of one chunk blob.
	MaxChunkBytes int `yaml:"max_chunk_bytes"`
	// MaxInflightChunks caps the chunk uploads in flight per stream.
	MaxInflightChunks int `yaml:"max_inflight_chunks"`
	// CacheBytes sizes the read cache of recent chunks; negative disables
	// it.
	CacheBytes int64 `yaml:"cache_bytes"`
}

// Defaults of Config.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultRequestTimeout   = 30 * time.Second
	DefaultOperationTimeout = 60 * time.Second
	DefaultMaxAttempts      = 5
	DefaultBaseDelay        = 50 * time.Millisecond
	DefaultMaxDelay         = 2 * time.Second
)

// Environment variables the URL form reads credentials from (the names
// gocloud.dev's azureblob uses).
const (
	EnvAccountKey       = "AZURE_STORAGE_KEY"
	EnvConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
	EnvSASToken         = "AZURE_STORAGE_SAS_TOKEN"
)

// ParseConfig reads a Config from YAML, JSON, or an azblob:// URL, and
// validates it (Validate). Unknown fields are an error, so a misspelt
// setting is not silently ignored.
//
// The URL form is azblob://CONTAINER/PREFIX?account_url=URL
// &account_name=NAME&request_timeout=30s&operation_timeout=60s
// &connect_timeout=5s&max_attempts=5&linger=5ms&max_chunk_bytes=N
// &max_inflight_chunks=N&cache_bytes=N. Secrets never appear in it: they
// come from AZURE_STORAGE_KEY, AZURE_STORAGE_CONNECTION_STRING or
// AZURE_STORAGE_SAS_TOKEN, else DefaultAzureCredential is used.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	text := bytes.TrimSpace(data)
	if bytes.HasPrefix(text, []byte("azblob://")) {
		var err error
		if c, err = parseURL(string(text)); err != nil {
			return Config{}, err
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil {
			return Config{}, fmt.Errorf("%w: azure config: %v", stream.ErrInvalidArgument, err)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseURL reads the azblob:// form documented on ParseConfig.
func parseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("%w: azure config URL: %v", stream.ErrInvalidArgument, err)
	}
	c := Config{Container: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	c.Credentials.AccountKey = os.Getenv(EnvAccountKey)
	c.Credentials.ConnectionString = os.Getenv(EnvConnectionString)
	c.Credentials.SASToken = os.Getenv(EnvSASToken)
	bad := func(k string, err error) error {
		return fmt.Errorf("%w: azure config URL: parameter %s: %v", stream.ErrInvalidArgument, k, err)
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		var err error
		switch k {
		case "account_url":
			c.AccountURL = v
		case "account_name":
			c.Credentials.AccountName = v
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
		case "cache_bytes":
			c.Engine.CacheBytes, err = strconv.ParseInt(v, 10, 64)
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
		return fmt.Errorf("%w: azure config: %s: %s", stream.ErrInvalidArgument, field, fmt.Sprintf(format, args...))
	}
	cr := c.Credentials
	if c.AccountURL == "" && cr.ConnectionString == "" {
		return bad("account_url", "required (or credentials.connection_string)")
	}
	if c.AccountURL != "" {
		u, err := url.Parse(c.AccountURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("account_url", "%q is not an http:// or https:// URL", c.AccountURL)
		}
		if u.RawQuery != "" {
			return bad("account_url", "must not carry a query; put a SAS in credentials.sas_token")
		}
	}
	if c.Container == "" {
		return bad("container", "required")
	}
	if err := validContainer(c.Container); err != nil {
		return bad("container", "%q: %v", c.Container, err)
	}
	if p := strings.TrimSuffix(c.Prefix, "/"); p != "" {
		if err := stream.ValidateName(p); err != nil {
			return bad("prefix", "%q must be '/'-separated elements of [A-Za-z0-9._-]", c.Prefix)
		}
	}
	n := 0
	for _, s := range []string{cr.AccountKey, cr.ConnectionString, cr.SASToken} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return bad("credentials", "set at most one of account_key, connection_string and sas_token")
	}
	if n == 0 && strings.HasPrefix(c.AccountURL, "http://") {
		return bad("account_url", "%q: DefaultAzureCredential (no account_key, connection_string or sas_token) needs an https:// endpoint", c.AccountURL)
	}
	if cr.AccountKey != "" {
		if cr.AccountName == "" && accountFromURL(c.AccountURL) == "" {
			return bad("credentials.account_name", "required with account_key (not derivable from account_url %q)", c.AccountURL)
		}
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

// validContainer applies Azure's container naming rules: 3-63 bytes of
// [a-z0-9-], starting and ending alphanumeric, no "--".
func validContainer(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("must be 3-63 bytes")
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
			return fmt.Errorf("byte %q at %d is not in [a-z0-9-]", b, i)
		}
	}
	if name[0] == '-' || name[len(name)-1] == '-' || strings.Contains(name, "--") {
		return fmt.Errorf("must start and end with a letter or digit and have no \"--\"")
	}
	return nil
}

// accountFromURL derives the account name from a blob endpoint: the first
// host label of ACCOUNT.blob.core.windows.net (and other clouds' suffixes),
// else the first path element of a path-style URL (Azurite, IP hosts).
func accountFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if first, _, _ := strings.Cut(strings.Trim(u.Path, "/"), "/"); first != "" {
		return first
	}
	host := u.Hostname()
	if label, rest, ok := strings.Cut(host, "."); ok && strings.HasPrefix(rest, "blob.") {
		return label
	}
	return ""
}

// withDefaults returns c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	if c.Credentials.AccountKey != "" && c.Credentials.AccountName == "" {
		c.Credentials.AccountName = accountFromURL(c.AccountURL)
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
