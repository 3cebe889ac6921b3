package azure

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
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
	// Retry bounds the retries of transient failures: 408, 429, 500, 502,
	// 503, 504 and network errors or request timeouts. Backoff is the
	// azcore retry policy's (exponential with jitter between BaseDelay and
	// MaxDelay); a Retry-After header from the service takes precedence.
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

// Timeouts bound the driver's waits (connect, request: one HTTP request,
// one try; operation: one Storage call with its retries).
type Timeouts = driverconfig.Timeouts

// Retry bounds the retries of transient failures.
type Retry = driverconfig.Retry

// Engine tunes the chunked engine the driver runs on.
type Engine = driverconfig.Engine

// Defaults of Config.
const (
	DefaultConnectTimeout   = driverconfig.DefaultConnectTimeout
	DefaultRequestTimeout   = driverconfig.DefaultRequestTimeout
	DefaultOperationTimeout = driverconfig.DefaultOperationTimeout
	DefaultMaxAttempts      = driverconfig.DefaultMaxAttempts
	DefaultBaseDelay        = driverconfig.DefaultBaseDelay
	DefaultMaxDelay         = driverconfig.DefaultMaxDelay
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
// &connect_timeout=5s&max_attempts=5&base_delay=50ms&max_delay=2s
// &linger=5ms&max_chunk_bytes=N&max_inflight_chunks=N&max_batch_bytes=N
// &cache_bytes=N. Secrets never appear in it: they
// come from AZURE_STORAGE_KEY, AZURE_STORAGE_CONNECTION_STRING or
// AZURE_STORAGE_SAS_TOKEN, else DefaultAzureCredential is used.
func ParseConfig(data []byte) (Config, error) {
	return driverconfig.Parse(DriverName, "azblob", data, fromURL, Config.Validate)
}

// fromURL reads the azblob:// form documented on ParseConfig.
func fromURL(u *url.URL) (Config, error) {
	c := Config{Container: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	c.Credentials.AccountKey = os.Getenv(EnvAccountKey)
	c.Credentials.ConnectionString = os.Getenv(EnvConnectionString)
	c.Credentials.SASToken = os.Getenv(EnvSASToken)
	p := driverconfig.Params{
		"account_url":  driverconfig.String(&c.AccountURL),
		"account_name": driverconfig.String(&c.Credentials.AccountName),
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
	if err := driverconfig.CheckPrefix(DriverName, "prefix", c.Prefix); err != nil {
		return err
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
	return driverconfig.ValidateSections(DriverName, &c.Timeouts, &c.Retry, &c.Engine)
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
	c.Prefix = driverconfig.DirPrefix(c.Prefix)
	if c.Credentials.AccountKey != "" && c.Credentials.AccountName == "" {
		c.Credentials.AccountName = accountFromURL(c.AccountURL)
	}
	c.Timeouts = c.Timeouts.WithDefaults()
	c.Retry = c.Retry.WithDefaults()
	return c
}
