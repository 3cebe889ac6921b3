package wal

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// TestWALStoreSwitchKeepsTails: a WAL stays in the store its session made
// it in. A store started with Options.WALStore set finds, fences, reads
// and sweeps the WALs a crashed session left in the base (an upgrade to
// WALs in files), and one started without it those a crashed session left
// in the WAL store it had, named now as a former one (wal_files turned
// off): every acknowledged batch is there, once, and the dead WAL is
// swept where it is.
func TestWALStoreSwitchKeepsTails(t *testing.T) {
	for _, c := range []struct {
		name          string
		before, after bool
	}{{"base to WAL store", false, true}, {"WAL store to base", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			base := memory.New(memory.Config{})
			walStore := memory.New(memory.Config{})
			opts := func(files bool, sweep int64) Options {
				o := Options{SweepInterval: 1 << sweep}
				ws := stream.NewStore(keepBase{walStore.Driver()})
				if files {
					o.WALStore = ws
				} else {
					o.FormerWALStores = []*stream.Store{ws}
				}
				return o
			}
			names := []string{"a", "b", "c"}
			dead := crashedWriterOpts(t, base, opts(c.before, 40), names...)
			held := base
			if c.before {
				held = walStore
			}
			if wals, _ := held.List(ctx, DefaultPrefix+"/"); !slices.Contains(wals, dead) {
				t.Fatalf("the crashed session's WAL %s is not in the store it was made in (%v)", dead, wals)
			}
			s, err := NewStore(stream.NewStore(keepBase{base.Driver()}), opts(c.after, 40))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, n := range names {
				st, err := s.Open(ctx, n, stream.OpenOptions{Epoch: 2})
				if err != nil {
					t.Fatal(err)
				}
				bs, err := st.Fetch(ctx, 0, stream.NoEnd, 0)
				if err != nil || len(bs) != 3 {
					t.Fatalf("%s after the switch: %d batches, %v; want the 3 acknowledged", n, len(bs), err)
				}
				for i, b := range bs {
					if want := fmt.Sprintf("%s-%d", n, i); string(b.Payload) != want || b.BaseOffset != int64(i) {
						t.Fatalf("%s: batch %q at %d, want %q at %d", n, b.Payload, b.BaseOffset, want, i)
					}
				}
				mustAppend(t, st, n+"-3")
			}
			if err := s.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			if wals, _ := held.List(ctx, DefaultPrefix+"/"); slices.Contains(wals, dead) {
				t.Fatalf("the dead WAL %s was not swept once no record names it (%v)", dead, wals)
			}
		})
	}
}
