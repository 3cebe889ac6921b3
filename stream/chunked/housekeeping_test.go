package chunked

import (
	"context"
	"strings"
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
				s := st.(*Store)
				w := mustOpen(t, s, "x", 1)
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
