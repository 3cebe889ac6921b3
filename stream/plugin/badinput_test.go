//go:build unix

package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stratastream/strata/stream"
)

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestStartErrors(t *testing.T) {
	ctx := testCtx(t)
	mem := memoryBinary(t)
	cases := []struct {
		name   string
		binary string
		opts   []Option
		text   string
	}{
		{"not a driver", binary(t, "notadriver", "stream/plugin/testdata/notadriver"), nil, "not a plugin"},
		{"missing binary", "/nonexistent/strata-driver-x", nil, "nonexistent"},
		{"wrong protocol version", binary(t, "baddriver-v2", "stream/plugin/testdata/baddriver", "-ldflags", "-X main.protocolVersion=2"), nil, "version"},
		{"checksum mismatch", mem, []Option{WithSHA256(strings.Repeat("00", 32))}, "checksum"},
		{"malformed checksum", mem, []Option{WithSHA256("abc")}, "sha256"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Start(ctx, tc.binary, tc.opts...)
			if err == nil {
				c.Close()
				t.Fatal("Start succeeded")
			}
			if !errors.Is(err, stream.ErrInvalidArgument) {
				t.Fatalf("Start: %v, want ErrInvalidArgument", err)
			}
			if !strings.Contains(strings.ToLower(err.Error()), tc.text) {
				t.Fatalf("Start: %q does not say %q", err, tc.text)
			}
		})
	}
	t.Run("checksum match", func(t *testing.T) {
		c, err := Start(ctx, mem, WithSHA256(fileSHA256(t, mem)))
		if err != nil {
			t.Fatalf("Start with the right sha256: %v", err)
		}
		c.Close()
	})
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := Start(cctx, mem); !errors.Is(err, context.Canceled) {
			t.Fatalf("Start with a cancelled ctx: %v", err)
		}
	})
}

// openBad opens a store on the misbehaving test driver in the given mode
// and a session on it.
func openBad(t *testing.T, mode string) *stream.Stream {
	t.Helper()
	ctx := testCtx(t)
	st, err := Open(ctx, badBinary(t), []byte(`{"Mode":"`+mode+`"}`))
	if err != nil {
		t.Fatalf("Open bad driver: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, err := st.Open(ctx, "s", stream.OpenOptions{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMisbehavingDriverFetch: malformed, truncated or contract-breaking
// fetch answers are ErrCorrupt, never data.
func TestMisbehavingDriverFetch(t *testing.T) {
	for _, mode := range []string{"fetch-badcrc", "fetch-gap", "fetch-notcovering", "fetch-beyondnext", "fetch-truncated", "fetch-garbage"} {
		t.Run(mode, func(t *testing.T) {
			s := openBad(t, mode)
			got, err := s.Fetch(testCtx(t), 0, stream.NoEnd, 0)
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("Fetch: %d batches, %v; want ErrCorrupt", len(got), err)
			}
			if got != nil {
				t.Fatalf("Fetch returned data with its error: %v", got)
			}
		})
	}
	t.Run("well-behaved", func(t *testing.T) {
		s := openBad(t, "fine")
		got, err := s.Fetch(testCtx(t), 0, stream.NoEnd, 0)
		if err != nil || len(got) != 1 || string(got[0].Payload) != "fine" {
			t.Fatalf("Fetch = %v, %v", got, err)
		}
	})
}

// TestMisbehavingDriverAppend: bad acks break the session's pipeline with
// ErrCorrupt (or ErrUnavailable); never a wrong offset.
func TestMisbehavingDriverAppend(t *testing.T) {
	cases := []struct {
		mode string
		want error
	}{
		{"ack-badcount", stream.ErrCorrupt},
		{"ack-backwards", stream.ErrCorrupt},
		{"ack-extra", stream.ErrCorrupt},
		{"ack-truncated", stream.ErrCorrupt},
		{"ack-unknown-reason", stream.ErrUnavailable},
		{"exit", stream.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := testCtx(t)
			s := openBad(t, tc.mode)
			// The test driver's stream starts at next offset 10.
			if tc.mode == "ack-backwards" {
				if res, err := stream.Append(ctx, s, stream.Batch{Count: 1}); err == nil {
					t.Fatalf("append acked at %+v below the session's next offset", res)
				} else if !errors.Is(err, tc.want) {
					t.Fatalf("append: %v, want %v", err, tc.want)
				}
				return
			}
			f1 := s.Append(ctx, stream.Batch{Count: 2, Payload: []byte("a")})
			_, err := f1.Wait(ctx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("append: %v, want %v", err, tc.want)
			}
			if tc.mode == "exit" && !strings.Contains(err.Error(), "exit status 7") {
				t.Fatalf("append: %q does not name the exit status", err)
			}
			if tc.mode == "ack-unknown-reason" {
				if !strings.Contains(err.Error(), "a reason from the future") {
					t.Fatalf("message lost: %q", err)
				}
				return
			}
			if _, err := s.Append(ctx, stream.Batch{Count: 1}).Wait(ctx); err == nil {
				t.Fatal("append after a broken pipeline succeeded")
			}
		})
	}
}

// TestDriverLogsReachHostSlog: a driver's log/slog lines arrive in the
// host's slog.Logger with their level and attributes.
func TestDriverLogsReachHostSlog(t *testing.T) {
	ctx := testCtx(t)
	h := &recordHandler{}
	c, err := Start(ctx, binary(t, "logdriver", "stream/plugin/testdata/logdriver"), WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenStore(ctx, []byte("namespace: logs")); err != nil {
		t.Fatal(err)
	}
	// Logs travel asynchronously (stderr); Close flushes them.
	_ = c.Close()
	r, ok := h.find("logdriver opening store")
	if !ok {
		t.Fatalf("driver log line not seen by the host's slog (%d records)", len(h.records))
	}
	if r.Level != slog.LevelInfo {
		t.Fatalf("level %v, want INFO", r.Level)
	}
	var bytesAttr any
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "config_bytes" {
			bytesAttr = a.Value.Any()
		}
		return true
	})
	if bytesAttr != float64(len("namespace: logs")) {
		t.Fatalf("config_bytes attribute = %v (%T)", bytesAttr, bytesAttr)
	}
	if r, ok := h.find("logdriver debug line"); !ok || r.Level != slog.LevelDebug {
		t.Fatalf("debug line: %v %v", ok, r.Level)
	}
}
