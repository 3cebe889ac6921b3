package driverconfig

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// testConfig is a driver config with every shared section and a URL form.
type testConfig struct {
	Name     string   `yaml:"name"`
	Timeouts Timeouts `yaml:"timeouts"`
	Retry    Retry    `yaml:"retry"`
	Engine   Engine   `yaml:"engine"`
}

func (c testConfig) validate() error {
	return ValidateSections("test", &c.Timeouts, &c.Retry, &c.Engine)
}

func fromTestURL(u *url.URL) (testConfig, error) {
	c := testConfig{}
	p := Params{"name": String(&c.Name)}
	return c, SectionParams(p, &c.Timeouts, &c.Retry, &c.Engine).Apply("test", u.Query())
}

func parseTest(data []byte) (testConfig, error) {
	return Parse("test", "tst", data, fromTestURL, testConfig.validate)
}

// TestParse: YAML, JSON and URL documents decode to the same fields; bad
// ones fail with ErrInvalidArgument naming the field or parameter.
func TestParse(t *testing.T) {
	want := testConfig{Name: "a", Timeouts: Timeouts{Request: time.Second}, Retry: Retry{MaxAttempts: 3},
		Engine: Engine{Linger: 2 * time.Millisecond, MaxBatchBytes: 10, CacheBytes: -1}}
	for _, doc := range []string{
		"name: a\ntimeouts: {request: 1s}\nretry: {max_attempts: 3}\nengine: {linger: 2ms, max_batch_bytes: 10, cache_bytes: -1}\n",
		`{"name": "a", "timeouts": {"request": "1s"}, "retry": {"max_attempts": 3}, "engine": {"linger": "2ms", "max_batch_bytes": 10, "cache_bytes": -1}}`,
		"  tst://x?name=a&request_timeout=1s&max_attempts=3&linger=2ms&max_batch_bytes=10&cache_bytes=-1\n",
	} {
		got, err := parseTest([]byte(doc))
		if err != nil || got != want {
			t.Errorf("parse %q = %+v, %v; want %+v", doc, got, err, want)
		}
	}
	for doc, field := range map[string]string{
		"nmae: a\n":                         "nmae",
		"timeouts: {operation: -1s}\n":      "timeouts.operation",
		"retry: {max_attempts: 101}\n":      "retry.max_attempts",
		"retry: {max_delay: -1s}\n":         "retry.max_delay",
		"engine: {max_inflight_chunks: -1}": "engine.max_inflight_chunks",
		"tst://x?colour=red":                "colour",
		"tst://x?linger=soon":               "linger",
		"tst://x?max_chunk_bytes=1.5":       "max_chunk_bytes",
	} {
		_, err := parseTest([]byte(doc))
		if !errors.Is(err, stream.ErrInvalidArgument) || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "test config") {
			t.Errorf("parse %q: %v; want ErrInvalidArgument naming test config and %s", doc, err, field)
		}
	}
}

// TestDefaults: zero fields take the documented defaults, set ones stay.
func TestDefaults(t *testing.T) {
	tm := Timeouts{Request: time.Second}.WithDefaults()
	if tm != (Timeouts{Connect: DefaultConnectTimeout, Request: time.Second, Operation: DefaultOperationTimeout}) {
		t.Errorf("Timeouts defaults: %+v", tm)
	}
	r := Retry{MaxAttempts: 1}.WithDefaults()
	if r != (Retry{MaxAttempts: 1, BaseDelay: DefaultBaseDelay, MaxDelay: DefaultMaxDelay}) {
		t.Errorf("Retry defaults: %+v", r)
	}
	if got := (Retry{}).WithDefaults().MaxAttempts; got != DefaultMaxAttempts {
		t.Errorf("Retry default MaxAttempts %d", got)
	}
	o := Engine{Linger: time.Millisecond, MaxChunkBytes: 1, MaxInflightChunks: 2, MaxBatchBytes: 3, CacheBytes: 4}.Options("d", "v", time.Minute)
	if o.Driver != "d" || o.Version != "v" || o.Linger != time.Millisecond || o.MaxChunkBytes != 1 ||
		o.MaxInflightChunks != 2 || o.MaxBatchBytes != 3 || o.CacheBytes != 4 || o.OpTimeout != time.Minute {
		t.Errorf("Engine.Options: %+v", o)
	}
}

// TestPrefix: prefixes are checked and get their trailing '/'.
func TestPrefix(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "a/", "a/b/": "a/b/"} {
		if err := CheckPrefix("test", "prefix", in); err != nil {
			t.Errorf("CheckPrefix(%q): %v", in, err)
		}
		if got := DirPrefix(in); got != want {
			t.Errorf("DirPrefix(%q) = %q, want %q", in, got, want)
		}
	}
	if err := CheckPrefix("test", "prefix", "a b"); !errors.Is(err, stream.ErrInvalidArgument) || !strings.Contains(err.Error(), "prefix") {
		t.Errorf("CheckPrefix(\"a b\"): %v", err)
	}
}

// FuzzDecode: any document either decodes or fails with
// ErrInvalidArgument; it never panics.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("name: a\nengine: {linger: 2ms}\n"))
	f.Add([]byte("tst://x?max_attempts=3&linger=1s"))
	f.Add([]byte("tst://%zz"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := parseTest(data); err != nil && !errors.Is(err, stream.ErrInvalidArgument) {
			t.Fatalf("parse %q: %v does not wrap ErrInvalidArgument", data, err)
		}
	})
}
