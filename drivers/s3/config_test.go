package s3

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		check func(Config) bool
		bad   string // the field the error must name; "" = valid
	}{
		{"yaml", "bucket: bk1\nprefix: p/q\nendpoint: http://127.0.0.1:9000\npath_style: true\ntimeouts: {request: 3s}\nengine: {linger: 5ms}\n",
			func(c Config) bool {
				return c.Bucket == "bk1" && c.Prefix == "p/q" && c.PathStyle && c.Timeouts.Request == 3*time.Second && c.Engine.Linger == 5*time.Millisecond
			}, ""},
		{"json", `{"bucket":"bk1","credentials":{"access_key_id":"k","secret_access_key":"s"},"retry":{"max_attempts":2}}`,
			func(c Config) bool { return c.Credentials.AccessKeyID == "k" && c.Retry.MaxAttempts == 2 }, ""},
		{"url", "s3://bk1/some/prefix?region=eu-west-1&endpoint=http://h:1&path_style=true&linger=10ms&max_attempts=3",
			func(c Config) bool {
				return c.Bucket == "bk1" && c.Prefix == "some/prefix" && c.Region == "eu-west-1" && c.Endpoint == "http://h:1" &&
					c.PathStyle && c.Engine.Linger == 10*time.Millisecond && c.Retry.MaxAttempts == 3
			}, ""},
		{"no bucket", "prefix: x\n", nil, "bucket"},
		{"bad bucket", "bucket: Bad_Bucket\n", nil, "bucket"},
		{"unknown field", "bucket: bk1\nbukket: b2\n", nil, "bukket"},
		{"bad prefix", "bucket: bk1\nprefix: a//b\n", nil, "prefix"},
		{"bad endpoint", "bucket: bk1\nendpoint: 127.0.0.1:9000\n", nil, "endpoint"},
		{"half credentials", "bucket: bk1\ncredentials: {access_key_id: k}\n", nil, "credentials"},
		{"negative timeout", "bucket: bk1\ntimeouts: {request: -1s}\n", nil, "timeouts.request"},
		{"bad duration", "bucket: bk1\ntimeouts: {request: soon}\n", nil, "line 2: cannot unmarshal !!str (value hidden) into time.Duration"},
		{"too many attempts", "bucket: bk1\nretry: {max_attempts: 1000}\n", nil, "retry.max_attempts"},
		{"negative chunk", "bucket: bk1\nengine: {max_chunk_bytes: -1}\n", nil, "engine.max_chunk_bytes"},
		{"url unknown param", "s3://bk1/?colour=red", nil, "colour"},
		{"url bad bool", "s3://bk1/?path_style=maybe", nil, "path_style"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.in))
			if c.bad == "" {
				if err != nil {
					t.Fatalf("ParseConfig: %v", err)
				}
				if !c.check(cfg) {
					t.Fatalf("ParseConfig gave %+v", cfg)
				}
				return
			}
			if !errors.Is(err, stream.ErrInvalidArgument) || !strings.Contains(err.Error(), c.bad) {
				t.Fatalf("ParseConfig: %v; want ErrInvalidArgument naming %q", err, c.bad)
			}
		})
	}
}

func TestConfigRoundTrip(t *testing.T) {
	in := Config{Bucket: "bk1", Prefix: "p/", Endpoint: "http://h:1", PathStyle: true,
		Credentials: Credentials{AccessKeyID: "k", SecretAccessKey: "s"},
		Timeouts:    Timeouts{Request: 3 * time.Second, Operation: time.Minute},
		Retry:       Retry{MaxAttempts: 2, BaseDelay: time.Millisecond},
		Engine:      Engine{Linger: 5 * time.Millisecond, MaxChunkBytes: 1 << 20}}
	out, err := ParseConfig(marshalConfig(t, in))
	if err != nil || out != in {
		t.Fatalf("round trip: %+v, %v; want %+v", out, err, in)
	}
}

func TestWithDefaults(t *testing.T) {
	c := Config{Bucket: "bk1", Prefix: "p"}.withDefaults()
	if c.Prefix != "p/" || c.Timeouts.Request != DefaultRequestTimeout || c.Retry.MaxAttempts != DefaultMaxAttempts || c.Retry.MaxDelay != DefaultMaxDelay {
		t.Fatalf("withDefaults: %+v", c)
	}
}

func TestBackoff(t *testing.T) {
	r := Retry{BaseDelay: 10 * time.Millisecond, MaxDelay: 80 * time.Millisecond}
	for attempt := 1; attempt < 70; attempt++ {
		ceil := min(r.BaseDelay<<min(attempt-1, 20), r.MaxDelay)
		for range 20 {
			if d := backoff(r, attempt); d <= 0 || d > ceil {
				t.Fatalf("backoff(%d) = %v, want in (0, %v]", attempt, d, ceil)
			}
		}
	}
}

// FuzzParseConfig: any bytes give a valid config or an ErrInvalidArgument,
// never a panic, and a valid config round-trips.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("bucket: bk1\nprefix: p/\n"))
	f.Add([]byte(`{"bucket":"bk1","timeouts":{"request":"1s"}}`))
	f.Add([]byte("s3://bk1/p?region=r&linger=1ms"))
	f.Add([]byte("s3://%zz"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, stream.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseConfig returned an invalid config: %v", err)
		}
		again, err := ParseConfig(marshalConfig(t, cfg))
		if err != nil || again != cfg {
			t.Fatalf("round trip of %+v: %+v, %v", cfg, again, err)
		}
	})
}
