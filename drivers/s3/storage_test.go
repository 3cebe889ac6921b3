package s3

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// TestStorage runs the chunked.Storage suite against MinIO, including
// put-if-absent races between OS processes.
func TestStorage(t *testing.T) {
	drivertest.RunStorage(t, opener.OpenStorage, func(t *testing.T) []byte { return marshalConfig(t, minioConfig(t)) })
}

// TestRequestStats checks that every operation is counted as exactly the
// requests docs/drivers/s3.md says it makes.
func TestRequestStats(t *testing.T) {
	ctx := context.Background()
	st := newStorage(t, minioConfig(t))
	base := st.RequestStats()
	if base.Gets != 1 || base.Puts != 0 {
		t.Fatalf("after open: %+v, want exactly the one probe GET", base)
	}
	data := bytes.Repeat([]byte("x"), 1000)
	steps := []struct {
		name string
		do   func() error
		want chunked.RequestStats
	}{
		{"PutIfAbsent", func() error { return st.PutIfAbsent(ctx, "a/1", data) }, chunked.RequestStats{Puts: 1, BytesWritten: 1000}},
		{"PutIfAbsent taken", func() error {
			if err := st.PutIfAbsent(ctx, "a/1", data); !errors.Is(err, stream.ErrAlreadyExists) {
				t.Errorf("second PutIfAbsent: %v, want ErrAlreadyExists", err)
			}
			return nil
		}, chunked.RequestStats{Puts: 1, BytesWritten: 1000}},
		{"Put", func() error { return st.Put(ctx, "a/2", data[:10]) }, chunked.RequestStats{Puts: 1, BytesWritten: 10}},
		{"Get range", func() error {
			b, err := st.Get(ctx, "a/1", 100, 50)
			if err == nil && len(b) != 50 {
				t.Errorf("Get range: %d bytes, want 50", len(b))
			}
			return err
		}, chunked.RequestStats{Gets: 1, BytesRead: 50}},
		{"Get past end", func() error {
			b, err := st.Get(ctx, "a/1", 5000, 10)
			if err == nil && len(b) != 0 {
				t.Errorf("Get past end: %d bytes, want 0", len(b))
			}
			return err
		}, chunked.RequestStats{Gets: 1}},
		{"Stat", func() error {
			n, err := st.Stat(ctx, "a/1")
			if err == nil && n != 1000 {
				t.Errorf("Stat: %d, want 1000", n)
			}
			return err
		}, chunked.RequestStats{Heads: 1}},
		{"Stat absent", func() error {
			if _, err := st.Stat(ctx, "a/none"); !errors.Is(err, stream.ErrNotFound) {
				t.Errorf("Stat absent: %v, want ErrNotFound", err)
			}
			return nil
		}, chunked.RequestStats{Heads: 1}},
		{"List", func() error {
			keys, err := st.List(ctx, "a/", "", 0)
			if err == nil && strings.Join(keys, ",") != "a/1,a/2" {
				t.Errorf("List: %q", keys)
			}
			return err
		}, chunked.RequestStats{Lists: 1}},
		{"Delete two", func() error { return st.Delete(ctx, []string{"a/1", "a/2"}) }, chunked.RequestStats{Deletes: 1}},
		{"Delete one absent", func() error { return st.Delete(ctx, []string{"a/1"}) }, chunked.RequestStats{Deletes: 1}},
	}
	for _, s := range steps {
		before := st.RequestStats()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := st.RequestStats().Sub(before); got != s.want {
			t.Errorf("%s: requests %+v, want %+v", s.name, got, s.want)
		}
	}
}

// TestOpenBadInput: wrong credentials, a missing bucket and unreachable or
// silent endpoints fail at open, promptly, naming the setting.
func TestOpenBadInput(t *testing.T) {
	good := minioConfig(t)
	fast := Timeouts{Connect: time.Second, Request: 500 * time.Millisecond, Operation: 3 * time.Second}

	// A listener that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	// A port with nothing listening.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	cases := []struct {
		name   string
		edit   func(*Config)
		want   error
		phrase string
	}{
		{"wrong secret", func(c *Config) { c.Credentials.SecretAccessKey += "x" }, stream.ErrInvalidArgument, "credentials.secret_access_key"},
		{"unknown access key", func(c *Config) { c.Credentials.AccessKeyID = "nobody" }, stream.ErrInvalidArgument, "credentials.access_key_id"},
		{"missing bucket", func(c *Config) { c.Bucket = "no-such-bucket-strata" }, stream.ErrInvalidArgument, "bucket"},
		{"nothing listening", func(c *Config) { c.Endpoint = "http://" + closedAddr; c.Timeouts = fast }, stream.ErrUnavailable, "unreachable"},
		{"silent endpoint", func(c *Config) { c.Endpoint = "http://" + silent.Addr().String(); c.Timeouts = fast }, stream.ErrUnavailable, "timeouts."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			c.edit(&cfg)
			st, err := OpenStorage(context.Background(), cfg)
			if err == nil {
				st.Close()
				t.Fatalf("OpenStorage succeeded, want %v", c.want)
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.phrase) {
				t.Fatalf("OpenStorage: %v\nwant %v naming %q", err, c.want, c.phrase)
			}
			t.Logf("%v", err)
		})
	}
}

// faultProxy forwards requests to MinIO, answering some of them itself
// with an S3 error first: a fault injector in front of the real service.
type faultProxy struct {
	*httptest.Server
	// inject returns the status and S3 error code to answer r with, or 0.
	inject func(r *http.Request) (int, string)
	served atomic.Int64
}

func newFaultProxy(t *testing.T, target string, inject func(r *http.Request) (int, string)) *faultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{inject: inject}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, s3code := p.inject(r); code != 0 {
			p.served.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(code)
			if r.Method != http.MethodHead {
				w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + s3code + `</Code><Message>injected</Message></Error>`))
			}
			return
		}
		rp.ServeHTTP(w, r) // Host stays the proxy's, as signed.
	}))
	t.Cleanup(p.Close)
	return p
}

// TestRetries: 503 SlowDown and 500 are retried with backoff; the retries
// are counted; a policy of one attempt gives ErrUnavailable.
func TestRetries(t *testing.T) {
	cfg := minioConfig(t)
	var failPuts atomic.Int64
	proxy := newFaultProxy(t, cfg.Endpoint, func(r *http.Request) (int, string) {
		if r.Method == http.MethodPut && failPuts.Add(-1) >= 0 {
			if failPuts.Load()%2 == 0 {
				return http.StatusServiceUnavailable, "SlowDown"
			}
			return http.StatusInternalServerError, "InternalError"
		}
		return 0, ""
	})
	cfg.Endpoint = proxy.URL
	cfg.Retry = Retry{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	st := newStorage(t, cfg)
	ctx := context.Background()

	failPuts.Store(3)
	if err := st.PutIfAbsent(ctx, "r/1", []byte("one")); err != nil {
		t.Fatalf("PutIfAbsent through 3 injected failures with 4 attempts: %v", err)
	}
	if s := st.RequestStats(); s.Retries != 3 || s.Puts != 4 || s.Errors != 0 {
		t.Errorf("stats %+v, want 4 puts, 3 retries, 0 errors", s)
	}
	if b, err := st.Get(ctx, "r/1", 0, -1); err != nil || string(b) != "one" {
		t.Errorf("Get after retried put: %q, %v", b, err)
	}

	failPuts.Store(4)
	err := st.PutIfAbsent(ctx, "r/2", []byte("two"))
	if !errors.Is(err, stream.ErrUnavailable) || !strings.Contains(err.Error(), "4 attempt") {
		t.Errorf("PutIfAbsent through 4 injected failures: %v, want ErrUnavailable after 4 attempts", err)
	}
	if s := st.RequestStats(); s.Errors != 1 {
		t.Errorf("stats %+v, want 1 error", s)
	}
}

// TestConditionalConflict: 409 ConditionalRequestConflict on a
// put-if-absent is retried; if it never clears, a HEAD decides: taken ->
// ErrAlreadyExists, absent -> ErrUnavailable.
func TestConditionalConflict(t *testing.T) {
	cfg := minioConfig(t)
	var conflicts atomic.Int64
	proxy := newFaultProxy(t, cfg.Endpoint, func(r *http.Request) (int, string) {
		if r.Method == http.MethodPut && r.Header.Get("If-None-Match") == "*" && conflicts.Add(-1) >= 0 {
			return http.StatusConflict, "ConditionalRequestConflict"
		}
		return 0, ""
	})
	cfg.Endpoint = proxy.URL
	cfg.Retry = Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	st := newStorage(t, cfg)
	ctx := context.Background()

	conflicts.Store(2)
	if err := st.PutIfAbsent(ctx, "c/cleared", []byte("x")); err != nil {
		t.Errorf("409 twice then free, 3 attempts: %v, want success", err)
	}

	conflicts.Store(1 << 30)
	if err := st.PutIfAbsent(ctx, "c/absent", []byte("x")); !errors.Is(err, stream.ErrUnavailable) {
		t.Errorf("409 forever on an absent key: %v, want ErrUnavailable", err)
	}
	if _, err := st.Stat(ctx, "c/absent"); !errors.Is(err, stream.ErrNotFound) {
		t.Errorf("Stat c/absent: %v, want ErrNotFound", err)
	}
	if err := st.Put(ctx, "c/taken", []byte("other")); err != nil {
		t.Fatal(err)
	}
	if err := st.PutIfAbsent(ctx, "c/taken", []byte("x")); !errors.Is(err, stream.ErrAlreadyExists) {
		t.Errorf("409 forever on an existing key: %v, want ErrAlreadyExists", err)
	}
	if b, err := st.Get(ctx, "c/taken", 0, -1); err != nil || string(b) != "other" {
		t.Errorf("c/taken holds %q, %v; want the first writer's bytes", b, err)
	}
}
