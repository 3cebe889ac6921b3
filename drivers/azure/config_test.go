package azure

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

const testKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, doc string
		badField  string // "" means the config is valid
	}{
		{"azurite yaml", "account_url: http://127.0.0.1:10000/devstoreaccount1\ncontainer: strata\ncredentials:\n  account_key: " + testKey + "\n", ""},
		{"json", `{"account_url": "https://acct.blob.core.windows.net", "container": "c01", "prefix": "a/b"}`, ""},
		{"connection string alone", "container: abc\ncredentials:\n  connection_string: \"AccountName=a;AccountKey=" + testKey + "\"\n", ""},
		{"sas", "account_url: https://acct.blob.core.windows.net/\ncontainer: abc\ncredentials:\n  sas_token: \"?sv=2021&sig=x\"\n", ""},
		{"durations", "account_url: https://a.blob.core.windows.net\ncontainer: abc\ntimeouts:\n  request: 2s\nretry:\n  max_attempts: 1\nengine:\n  linger: 5ms\n", ""},
		{"url form", "azblob://strata/pre/fix?account_url=https://127.0.0.1:1/devstoreaccount1&linger=2ms&max_attempts=3", ""},
		{"no endpoint", "container: abc\n", "account_url"},
		{"default credential over http", "account_url: http://127.0.0.1:10000/devstoreaccount1\ncontainer: abc\n", "needs an https"},
		{"bad endpoint", "account_url: ftp://x\ncontainer: abc\n", "account_url"},
		{"endpoint with query", "account_url: https://a.blob.core.windows.net/?sig=x\ncontainer: abc\n", "account_url"},
		{"no container", "account_url: https://a.blob.core.windows.net\n", "container"},
		{"upper-case container", "account_url: https://a.blob.core.windows.net\ncontainer: Abc\n", "container"},
		{"double dash container", "account_url: https://a.blob.core.windows.net\ncontainer: a--b\n", "container"},
		{"bad prefix", "account_url: https://a.blob.core.windows.net\ncontainer: abc\nprefix: a//b\n", "prefix"},
		{"two credentials", "account_url: https://a.blob.core.windows.net\ncontainer: abc\ncredentials:\n  account_key: k\n  sas_token: s\n", "credentials"},
		{"key without account", "account_url: https://example.com\ncontainer: abc\ncredentials:\n  account_key: k\n", "credentials.account_name"},
		{"negative timeout", "account_url: https://a.blob.core.windows.net\ncontainer: abc\ntimeouts:\n  request: -1s\n", "timeouts.request"},
		{"too many attempts", "account_url: https://a.blob.core.windows.net\ncontainer: abc\nretry:\n  max_attempts: 1000\n", "retry.max_attempts"},
		{"negative chunk", "account_url: https://a.blob.core.windows.net\ncontainer: abc\nengine:\n  max_chunk_bytes: -1\n", "engine.max_chunk_bytes"},
		{"misspelt field", "account_url: https://a.blob.core.windows.net\ncontainer: abc\nprefx: x\n", "prefx"},
		{"url unknown parameter", "azblob://strata?colour=red", "colour"},
		{"url bad duration", "azblob://strata?account_url=http://x/a&linger=soon", "linger"},
		{"not yaml", "{", "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tt.doc))
			if tt.badField == "" {
				if err != nil {
					t.Fatalf("ParseConfig: %v", err)
				}
				if cfg.Container == "" {
					t.Fatalf("ParseConfig lost the container: %+v", cfg)
				}
				return
			}
			if !errors.Is(err, stream.ErrInvalidArgument) {
				t.Fatalf("ParseConfig = %v, want ErrInvalidArgument", err)
			}
			if !strings.Contains(err.Error(), tt.badField) {
				t.Fatalf("error %q does not name %s", err, tt.badField)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte("azblob://strata/p?account_url=https://127.0.0.1:1/devstoreaccount1&request_timeout=3s"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Credentials.AccountKey = testKey
	d := cfg.withDefaults()
	if d.Prefix != "p/" || d.Credentials.AccountName != "devstoreaccount1" || d.Timeouts.Request != 3*time.Second ||
		d.Timeouts.Operation != DefaultOperationTimeout || d.Retry.MaxAttempts != DefaultMaxAttempts {
		t.Fatalf("withDefaults = %+v", d)
	}
}

func TestAccountFromURL(t *testing.T) {
	for url, want := range map[string]string{
		"https://acct.blob.core.windows.net":        "acct",
		"https://acct.blob.core.windows.net/":       "acct",
		"https://acct.blob.core.chinacloudapi.cn":   "acct",
		"http://127.0.0.1:10000/devstoreaccount1":   "devstoreaccount1",
		"http://localhost:10000/devstoreaccount1/":  "devstoreaccount1",
		"https://storage.example.com":               "",
		"http://[::1]:10000/devstoreaccount1/extra": "devstoreaccount1",
	} {
		if got := accountFromURL(url); got != want {
			t.Errorf("accountFromURL(%q) = %q, want %q", url, got, want)
		}
	}
}

// FuzzParseConfig: any bytes either parse into a config that validates, or
// fail with ErrInvalidArgument; never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("account_url: http://127.0.0.1:10000/devstoreaccount1\ncontainer: strata\n"))
	f.Add([]byte(`{"account_url":"https://a.blob.core.windows.net","container":"abc","engine":{"linger":"1ms"}}`))
	f.Add([]byte("azblob://strata/x?account_url=https://h/a&max_attempts=2"))
	f.Add([]byte("credentials: {account_key: k, sas_token: s}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, stream.ErrInvalidArgument) {
				t.Fatalf("ParseConfig error %v is not ErrInvalidArgument", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
	})
}
