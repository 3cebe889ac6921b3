package chunked_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// recordingStorage is a chunked.Storage that records every key it is asked
// about, so a test can show that a call touched no object at all.
type recordingStorage struct {
	chunked.Storage
	mu   sync.Mutex
	keys []string
}

func (r *recordingStorage) note(op, key string) {
	r.mu.Lock()
	r.keys = append(r.keys, op+" "+key)
	r.mu.Unlock()
}

func (r *recordingStorage) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.keys
	r.keys = nil
	return k
}

func (r *recordingStorage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	r.note("PutIfAbsent", key)
	return r.Storage.PutIfAbsent(ctx, key, data)
}

func (r *recordingStorage) Put(ctx context.Context, key string, data []byte) error {
	r.note("Put", key)
	return r.Storage.Put(ctx, key, data)
}

func (r *recordingStorage) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	r.note("Get", key)
	return r.Storage.Get(ctx, key, off, n)
}

func (r *recordingStorage) Stat(ctx context.Context, key string) (int64, error) {
	r.note("Stat", key)
	return r.Storage.Stat(ctx, key)
}

func (r *recordingStorage) Delete(ctx context.Context, keys []string) error {
	r.note("Delete", strings.Join(keys, ","))
	return r.Storage.Delete(ctx, keys)
}

func (r *recordingStorage) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	r.note("List", prefix)
	return r.Storage.List(ctx, prefix, after, limit)
}

// hostileNames are stream names that would address objects outside a
// driver's root (or another stream's keys) if they reached a backend.
var hostileNames = []string{
	"", ".", "..", "../x", "../../etc/passwd", "a/../../x", "a/./b", "./a",
	"/abs", "/etc/passwd", "a//b", "a/", "a/..", "a\\..\\b", "..\\x",
	"a\x00b", "a\nb", "a b", "a%2f..%2fb", "~root", "a?b", "a#b", "a*", "ü",
	"C:\\x", "a:b", strings.Repeat("n", stream.MaxNameLen+1),
}

// TestHostileNamesBeforeIO: every Store call with a hostile name is
// ErrInvalidArgument, and the engine (on which the nfs, s3, azure and hdfs
// drivers are built) makes no Storage request for it: no key derived from
// the name ever reaches a backend. The memory driver, which is not on the
// engine, refuses the same names.
func TestHostileNamesBeforeIO(t *testing.T) {
	ctx := context.Background()
	rec := &recordingStorage{Storage: chunked.NewMemStorage()}
	engine, err := chunked.NewStore(rec, chunked.Options{Driver: "recording"})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	mem, err := memory.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	rec.take() // whatever NewStore itself read
	for _, st := range []struct {
		name  string
		store *stream.Store
	}{{"engine", engine}, {"memory", mem}} {
		for _, n := range hostileNames {
			calls := map[string]error{}
			calls["Create"] = st.store.Create(ctx, n)
			_, calls["Open"] = st.store.Open(ctx, n, stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
			_, calls["Open(read-only)"] = st.store.Open(ctx, n, stream.OpenOptions{Mode: stream.ModeReadOnly})
			calls["Delete"] = st.store.Delete(ctx, n)
			for op, err := range calls {
				if !errors.Is(err, stream.ErrInvalidArgument) {
					t.Errorf("%s: %s(%q) = %v, want ErrInvalidArgument", st.name, op, n, err)
				}
			}
			if keys := rec.take(); len(keys) > 0 {
				t.Errorf("%s: hostile name %q reached the storage: %q", st.name, n, keys)
			}
		}
	}
	// The check can fail: a good name does reach the storage.
	if err := engine.Create(ctx, "good/name"); err != nil {
		t.Fatal(err)
	}
	if len(rec.take()) == 0 {
		t.Fatal("recordingStorage saw no request for a good name; the test cannot tell")
	}
}

// TestHostileListPrefix: List with a prefix that could never be a stream
// name prefix returns nothing or ErrInvalidArgument, never a key outside
// the driver's streams.
func TestHostileListPrefix(t *testing.T) {
	ctx := context.Background()
	st, err := chunked.NewStore(chunked.NewMemStorage(), chunked.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(ctx, "a/b"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../", "/", "a/../", "\x00"} {
		names, err := st.List(ctx, p)
		if err != nil && !errors.Is(err, stream.ErrInvalidArgument) {
			t.Errorf("List(%q): %v, want nil or ErrInvalidArgument", p, err)
		}
		for _, n := range names {
			if stream.ValidateName(n) != nil {
				t.Errorf("List(%q) returned the invalid name %q", p, n)
			}
		}
	}
}
