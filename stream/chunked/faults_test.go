package chunked

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratastream/strata/stream"
)

// faultStorage is a MemStorage whose calls fail on demand: a rule sees
// the operation and key and returns the error to answer with (nil: run
// the call). With landed, a failing PutIfAbsent stores its object first
// (an answer lost after the put took effect).
type faultStorage struct {
	*MemStorage
	mu     sync.Mutex
	rule   func(op, key string) error
	landed bool
}

func (f *faultStorage) set(rule func(op, key string) error, landed bool) {
	f.mu.Lock()
	f.rule, f.landed = rule, landed
	f.mu.Unlock()
}

func (f *faultStorage) fault(op, key string) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rule == nil {
		return nil, false
	}
	return f.rule(op, key), f.landed
}

func (f *faultStorage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err, landed := f.fault("put-if-absent", key)
	if err == nil {
		return f.MemStorage.PutIfAbsent(ctx, key, data)
	}
	if landed {
		_ = f.MemStorage.PutIfAbsent(ctx, key, data)
	}
	return err
}

func (f *faultStorage) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err, _ := f.fault("get", key); err != nil {
		return nil, err
	}
	return f.MemStorage.Get(ctx, key, off, n)
}

var errInjected = fmt.Errorf("%w: injected fault", stream.ErrUnavailable)

// halfDeleted returns a storage holding stream name, appended to, whose
// Delete wrote its delete manifest but failed to link the tombstone.
func halfDeleted(t *testing.T, name string) *MemStorage {
	t.Helper()
	ctx := context.Background()
	f := &faultStorage{MemStorage: NewMemStorage()}
	s := newTestStore(t, keepOpen{f}, Options{Driver: "fault-test"})
	w := mustOpen(t, s, name, 1)
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(0)}); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	f.set(func(op, key string) error {
		if op == "put-if-absent" && strings.Contains(key, ".stream/g/") {
			return errInjected
		}
		return nil
	}, false)
	if err := s.Delete(ctx, name); !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("delete with its tombstone put failing: %v, want ErrUnavailable", err)
	}
	_ = s.Close()
	return f.MemStorage
}

// TestHalfDoneDeleteIsFinished: a Delete that wrote its delete manifest
// but not its tombstone (a failed put, a crash between the two) leaves a
// deleted stream, not a stuck name: List does not show it, a read-only
// Open is ErrNotFound, and Open with CreateIfMissing and Create make it
// anew (a broker restarting after a crash mid-DeleteTopics).
func TestHalfDoneDeleteIsFinished(t *testing.T) {
	ctx := context.Background()
	t.Run("list-and-read", func(t *testing.T) {
		s := newTestStore(t, halfDeleted(t, "p"), Options{Driver: "fault-test"})
		names, err := s.List(ctx, "")
		if err != nil || slices.Contains(names, "p") {
			t.Fatalf("List after a half-done delete: %v, %v; want no %q", names, err, "p")
		}
		mem := s.Driver().(*Store).st.(*MemStorage)
		puts := mem.RequestStats().Puts
		if _, err := s.Open(ctx, "p", stream.OpenOptions{Mode: stream.ModeReadOnly}); !errors.Is(err, stream.ErrNotFound) {
			t.Fatalf("read-only open after a half-done delete: %v, want ErrNotFound", err)
		}
		if n := mem.RequestStats().Puts - puts; n != 0 {
			t.Fatalf("a read-only open made %d puts", n)
		}
	})
	t.Run("open-create-if-missing", func(t *testing.T) {
		s := newTestStore(t, halfDeleted(t, "p"), Options{Driver: "fault-test"})
		w, err := s.Open(ctx, "p", stream.OpenOptions{Epoch: 2, CreateIfMissing: true})
		if err != nil {
			t.Fatalf("open (create if missing) after a half-done delete: %v", err)
		}
		defer w.Close()
		if n := w.NextOffset(); n != 0 {
			t.Fatalf("recreated stream: next offset %d, want 0", n)
		}
	})
	t.Run("create", func(t *testing.T) {
		s := newTestStore(t, halfDeleted(t, "p"), Options{Driver: "fault-test"})
		if err := s.Create(ctx, "p"); err != nil {
			t.Fatalf("create after a half-done delete: %v", err)
		}
		w := mustOpen(t, s, "p", 3)
		defer w.Close()
		if bs := fetchAll(t, w, 0); len(bs) != 0 {
			t.Fatalf("recreated stream holds %d batches of the deleted one", len(bs))
		}
		names, err := s.List(ctx, "")
		if err != nil || !slices.Equal(names, []string{"p"}) {
			t.Fatalf("List after recreating: %v, %v", names, err)
		}
	})
}

// TestFailedTrimStartHolds: a trim whose manifest put reports failure but
// lands has moved the start for every reader; the session that wrote it
// adopts that start, so a later, lower trim never moves it back (R5).
func TestFailedTrimStartHolds(t *testing.T) {
	ctx := context.Background()
	f := &faultStorage{MemStorage: NewMemStorage()}
	s := newTestStore(t, keepOpen{f}, Options{Driver: "fault-test"})
	w := mustOpen(t, s, "t", 1)
	defer w.Close()
	for i := 0; i < 20; i++ {
		if _, err := stream.Append(ctx, w, stream.Batch{Count: 10, Payload: payload(i)}); err != nil {
			t.Fatal(err)
		}
	}
	f.set(func(op, key string) error {
		if op == "put-if-absent" && strings.Contains(key, "/m/") {
			return errInjected
		}
		return nil
	}, true)
	if err := w.Trim(ctx, 150); !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("trim whose manifest put fails: %v, want ErrUnavailable", err)
	}
	f.set(nil, false)
	readerStart := func() int64 {
		t.Helper()
		r, err := s.Open(ctx, "t", stream.OpenOptions{Mode: stream.ModeReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.Fetch(ctx, 100, stream.NoEnd, 0); r.StartOffset() > 100 && !errors.Is(err, stream.ErrOffsetOutOfRange) {
			t.Fatalf("fetch 100 below the start %d: %v, want ErrOffsetOutOfRange", r.StartOffset(), err)
		}
		return r.StartOffset()
	}
	if got := readerStart(); got != 150 {
		t.Fatalf("a reader after the trim that landed: start %d, want 150", got)
	}
	if err := w.Trim(ctx, 60); err != nil {
		t.Fatalf("trim 60: %v", err)
	}
	if got := readerStart(); got != 150 {
		t.Fatalf("a reader after trim 60 that followed the landed trim 150: start %d, want 150 (the start moved back)", got)
	}
	if got := w.StartOffset(); got != 150 {
		t.Fatalf("writer's start after trims 150 (landed) and 60: %d, want 150", got)
	}
}

// TestOpenRetriesTransientReads: an open reads many objects (generations,
// the hint, manifests, index pages, chunk headers); one transient failure
// among them is retried, not the end of the open. Here the first read of
// every object fails.
func TestOpenRetriesTransientReads(t *testing.T) {
	ctx := context.Background()
	f := &faultStorage{MemStorage: NewMemStorage()}
	opts := Options{Driver: "fault-test", CheckpointChunks: 4, IndexPageEntries: 8}
	s := newTestStore(t, keepOpen{f}, opts)
	w := mustOpen(t, s, "r", 1)
	appendEach(t, w, 0, 40)
	_ = w.Close()
	failed := map[string]bool{}
	f.set(func(op, key string) error {
		if op != "get" || failed[key] {
			return nil
		}
		failed[key] = true
		return errInjected
	}, false)
	s2 := newTestStore(t, keepOpen{f}, opts)
	r, err := s2.Open(ctx, "r", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatalf("read-only open with the first read of every object failing: %v", err)
	}
	defer r.Close()
	w2, err := s2.Open(ctx, "r", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatalf("open with the first read of every object failing: %v", err)
	}
	defer w2.Close()
	pages := 0
	for k := range failed {
		if strings.Contains(k, "/x/") {
			pages++
		}
	}
	if pages == 0 || w2.NextOffset() != 40 {
		t.Fatalf("%d index page reads failed, next offset %d; want some and 40", pages, w2.NextOffset())
	}
}

// TestSessionsAfterDelete pins what the contract says of sessions opened
// before a Delete: a Fetch inside what they know may still return the
// deleted stream's (acked) batches from their cache; one that needs a
// re-walk fails, and appends fail ErrFenced.
func TestSessionsAfterDelete(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, NewMemStorage(), Options{Driver: "fault-test"})
	w := mustOpen(t, s, "d", 1)
	defer w.Close()
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(0)}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(ctx, "d", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if bs, err := r.Fetch(ctx, 0, 1, 0); err != nil || len(bs) != 1 {
		t.Fatalf("fetch before the delete: %v, %v", bs, err)
	}
	if err := s.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	for who, st := range map[string]*stream.Stream{"writer": w, "reader": r} {
		if bs, err := st.Fetch(ctx, 0, 1, 0); err != nil || len(bs) != 1 || string(bs[0].Payload) != string(payload(0)) {
			t.Fatalf("%s: cached fetch after the delete: %v, %v; want the acked batch", who, bs, err)
		}
	}
	if _, err := r.Fetch(ctx, 1, stream.NoEnd, 0); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("reader: fetch past what it knows after the delete: %v, want ErrNotFound", err)
	}
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(1)}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("writer: append after the delete: %v, want ErrFenced", err)
	}
}
