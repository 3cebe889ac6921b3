package chunked

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratastream/strata/stream"
)

// TestDeleteSweepsLateChunks: a chunk a stale writer lands under a deleted
// incarnation after Delete's removal pass is removed by the later sweep,
// after the grace period or at Close, and the incarnation's manifests (the
// delete fence) stay.
func TestDeleteSweepsLateChunks(t *testing.T) {
	for _, when := range []string{"after the grace period", "at Close"} {
		t.Run(when, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				mem := NewMemStorage()
				st, err := NewStore(mem, Options{Driver: "sweep-test"})
				if err != nil {
					t.Fatal(err)
				}
				s := st.Driver().(*Store)
				w := mustOpen(t, st, "x", 1)
				if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(1)}); err != nil {
					t.Fatal(err)
				}
				l, _, err := s.live(ctx, "x")
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Delete(ctx, "x"); err != nil {
					t.Fatal(err)
				}
				// A stale writer's put that was in flight lands now.
				zombie := l.chunk(7)
				if err := mem.PutIfAbsent(ctx, zombie, []byte("late chunk")); err != nil {
					t.Fatal(err)
				}
				_ = w.Close()
				if when == "at Close" {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
				} else {
					time.Sleep(2*DefaultOpTimeout + time.Second)
					synctest.Wait()
				}
				var manifests int
				for _, k := range mem.Keys() {
					switch {
					case !strings.HasPrefix(k, l.prefix):
					case strings.HasPrefix(k, l.prefix+manDir):
						manifests++
					default:
						t.Errorf("%s is still there after the sweep", k)
					}
				}
				if manifests == 0 {
					t.Errorf("the sweep removed the deleted incarnation's manifests (the delete fence)")
				}
				if when != "at Close" {
					_ = s.Close()
				}
			})
		})
	}
}

// TestOpenWalksStayShort: a stream that only ever sees short sessions
// (open, one append, close; no trim) must not make every open read its
// whole history: an open that walked far past its manifest's index
// checkpoints, so the next one starts near the end.
func TestOpenWalksStayShort(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	// No cache: count the reads an open on another host would make.
	s := newTestStore(t, mem, Options{Driver: "walk-test", CacheBytes: -1})
	const sessions = 300
	var lastGets int64
	for i := range sessions {
		before := mem.RequestStats().Gets
		w := mustOpen(t, s, "short", uint64(i+1))
		lastGets = mem.RequestStats().Gets - before
		if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(i)}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Each session leaves two slots (its fence chunk and its data chunk);
	// without checkpoints the last open would read all 600 (606 reads
	// measured), with them at most about openCheckpointSlots (29).
	if lastGets > 150 {
		t.Fatalf("open %d read %d objects: opens walk the whole history", sessions, lastGets)
	}
	t.Logf("the last open read %d objects", lastGets)
	r := mustOpen(t, s, "short", sessions+1)
	if got := len(fetchAll(t, r, 0)); got != sessions {
		t.Fatalf("read %d batches back, appended %d", got, sessions)
	}
	_ = r.Close()
}

// TestCheckpointsCollectWithoutList: a checkpoint (a manifest that does not
// move the start) deletes the fence chunks written since the manifest
// before it without listing the stream's chunks: on a stream that is never
// trimmed a LIST per checkpoint would read every chunk key each time.
func TestCheckpointsCollectWithoutList(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s, err := NewStore(keepOpen{mem}, Options{Driver: "gap-test", CheckpointChunks: 4})
	if err != nil {
		t.Fatal(err)
	}
	const sessions = 60
	for i := range sessions {
		w := mustOpen(t, s, "gaps", uint64(i+1))
		for j := range 3 {
			if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(3*i + j)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // waits for the GCs; mem stays open
		t.Fatal(err)
	}
	if n := mem.RequestStats().Lists; n != 0 {
		t.Fatalf("%d LIST requests for a stream that was never trimmed", n)
	}
	keys, err := mem.List(ctx, "", "", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for _, k := range keys {
		if strings.Contains(k, "/c/") {
			chunks++
		}
	}
	// 180 data chunks and 60 fence chunks were written; the fences below
	// the last checkpoint are gone.
	if chunks < 3*sessions || chunks > 3*sessions+8 {
		t.Fatalf("%d chunk objects left for %d data chunks: fence chunks are not collected", chunks, 3*sessions)
	}
	s2, err := NewStore(mem, Options{Driver: "gap-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	r := mustOpen(t, s2, "gaps", sessions+1)
	if got := len(fetchAll(t, r, 0)); got != 3*sessions {
		t.Fatalf("read %d batches back, appended %d", got, 3*sessions)
	}
}

// keepOpen is a Storage that a Store's Close does not close.
type keepOpen struct{ Storage }

func (keepOpen) Close() error { return nil }

// vanishing deletes the object a PutIfAbsent collided with, right after
// reporting the collision: what a newer session's GC does when it removes
// its fence chunk between a stale writer's put and the read that follows.
type vanishing struct {
	*MemStorage
	on atomic.Bool
}

func (v *vanishing) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := v.MemStorage.PutIfAbsent(ctx, key, data)
	if errors.Is(err, stream.ErrAlreadyExists) && v.on.Load() && strings.Contains(key, "/c/") {
		_ = v.MemStorage.Delete(ctx, []string{key})
	}
	return err
}

// TestCollisionWithVanishedWinnerFences: a stale writer whose put collides
// with a slot that is gone when it reads the winner is fenced (a newer
// session's GC removed the slot), not left with an append of unknown
// outcome (ErrUnavailable). The takeovers case of the conformance suite
// failed this way in about 1 of 100–160 runs under -race.
func TestCollisionWithVanishedWinnerFences(t *testing.T) {
	ctx := context.Background()
	v := &vanishing{MemStorage: NewMemStorage()}
	s1 := newTestStore(t, keepOpen{v}, Options{Driver: "vanish-test"})
	s2 := newTestStore(t, keepOpen{v}, Options{Driver: "vanish-test"})
	old := mustOpen(t, s1, "v", 1)
	if _, err := stream.Append(ctx, old, stream.Batch{Count: 1, Payload: payload(0)}); err != nil {
		t.Fatal(err)
	}
	newer := mustOpen(t, s2, "v", 2) // its fence takes the stale writer's next slot
	defer newer.Close()
	v.on.Store(true)
	_, err := stream.Append(ctx, old, stream.Batch{Count: 1, Payload: payload(1)})
	v.on.Store(false)
	if !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("stale append whose collision vanished: %v, want ErrFenced", err)
	}
	_ = old.Close()
}
