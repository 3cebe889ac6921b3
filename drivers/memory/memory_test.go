package memory

import (
	"context"
	"errors"
	"testing"

	"github.com/stratastream/strata/stream"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		doc string
		ok  bool
	}{
		{"", true},
		{`{"namespace": "x"}`, true},
		{"namespace: x\nmax_batch_bytes: 1024\n", true},
		{"nmespace: x\n", false},
		{"max_batch_bytes: -1\n", false},
		{"{", false},
	}
	for _, tt := range tests {
		_, err := ParseConfig([]byte(tt.doc))
		if (err == nil) != tt.ok {
			t.Errorf("ParseConfig(%q) = %v, want ok=%v", tt.doc, err, tt.ok)
		}
		if err != nil && !errors.Is(err, stream.ErrInvalidArgument) {
			t.Errorf("ParseConfig(%q) = %v, not ErrInvalidArgument", tt.doc, err)
		}
	}
}

func TestNamespaceShared(t *testing.T) {
	ctx := context.Background()
	a := New(Config{Namespace: t.Name()})
	b := New(Config{Namespace: t.Name()})
	private := New(Config{})
	if err := a.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, "s"); !errors.Is(err, stream.ErrAlreadyExists) {
		t.Fatalf("Create in shared namespace = %v, want ErrAlreadyExists", err)
	}
	if _, err := private.Open(ctx, "s", stream.OpenOptions{Mode: stream.ModeReadOnly}); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("private namespace sees shared stream: %v", err)
	}
}

// The stored batch never aliases the caller's buffers, in either direction.
func TestNoAliasing(t *testing.T) {
	ctx := context.Background()
	s, err := New(Config{}).Open(ctx, "s", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	p := []byte("hello")
	if _, err := stream.Append(ctx, s, stream.Batch{Count: 1, Payload: p}); err != nil {
		t.Fatal(err)
	}
	p[0] = 'X'
	got, err := s.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil || len(got) != 1 || string(got[0].Payload) != "hello" {
		t.Fatalf("Fetch = %v, %v; want hello", got, err)
	}
	got[0].Payload[0] = 'Y'
	again, _ := s.Fetch(ctx, 0, stream.NoEnd, 0)
	if string(again[0].Payload) != "hello" {
		t.Fatalf("fetched payload aliases storage: %q", again[0].Payload)
	}
}

// A flipped stored byte is ErrCorrupt on fetch, never data.
func TestCorruptionDetected(t *testing.T) {
	ctx := context.Background()
	store := New(Config{})
	s, _ := store.Open(ctx, "s", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if _, err := stream.Append(ctx, s, stream.Batch{Count: 1, Payload: []byte("abc")}); err != nil {
		t.Fatal(err)
	}
	st := s.Driver().(*handle).st
	st.mu.Lock()
	st.batches[0].b.Payload[1] ^= 0x01
	st.mu.Unlock()
	if _, err := s.Fetch(ctx, 0, stream.NoEnd, 0); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("Fetch of flipped byte = %v, want ErrCorrupt", err)
	}
}

func TestReadOnlyCannotWrite(t *testing.T) {
	ctx := context.Background()
	store := New(Config{})
	if err := store.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	r, err := store.Open(ctx, "s", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Append(ctx, r, stream.Batch{Count: 1}); !errors.Is(err, stream.ErrInvalidArgument) {
		t.Fatalf("Append on read-only = %v, want ErrInvalidArgument", err)
	}
	if err := r.Trim(ctx, 0); !errors.Is(err, stream.ErrInvalidArgument) {
		t.Fatalf("Trim on read-only = %v, want ErrInvalidArgument", err)
	}
}
