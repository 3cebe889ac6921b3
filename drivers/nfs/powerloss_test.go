package nfs

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/nfs/internal/lazyfs"
	"github.com/stratastream/strata/stream"
)

// powerAck is an append acked before a power cut.
type powerAck struct {
	off     int64
	payload []byte
}

// powerLossResult sums a run of power cycles.
type powerLossResult struct {
	cycles, acks, lost int
	firstLoss          string
}

// powerLossCycles runs cycles power cycles of a store (open, on a root
// directory it must create) on a lazyfs mount:
// open (a new owner, a higher epoch), check that every append acked
// before any earlier cut is in the log at its offset with its bytes,
// append pipelined until a random number of acks, cut the power at a
// random moment while appends are in flight, unmount, restart (only what
// was fsynced survives), mount again.
func powerLossCycles(t *testing.T, cycles int, open func(ctx context.Context, root string) (*stream.Store, error), seed uint64) powerLossResult {
	t.Helper()
	fsys, mnt := lazyfs.MountTemp(t)
	root := filepath.Join(mnt, "data", "strata") // missing: the driver makes it
	rng := rand.New(rand.NewPCG(seed, seed))
	var res powerLossResult
	var acked []powerAck
	for cycle := 1; cycle <= cycles; cycle++ {
		ctx := context.Background()
		store, err := open(ctx, root)
		if err != nil {
			t.Fatalf("cycle %d: open the store: %v", cycle, err)
		}
		st, err := store.Open(ctx, "p", stream.OpenOptions{Epoch: uint64(cycle), CreateIfMissing: true})
		if err != nil {
			t.Fatalf("cycle %d: open the stream: %v", cycle, err)
		}
		log, err := readLog(t, st)
		if err != nil {
			t.Fatalf("cycle %d: read the log: %v", cycle, err)
		}
		byOff := map[int64][]byte{}
		for _, b := range log {
			byOff[b.BaseOffset] = b.Payload
		}
		for _, a := range acked {
			if got, ok := byOff[a.off]; !ok || !bytes.Equal(got, a.payload) {
				res.lost++
				if res.firstLoss == "" {
					res.firstLoss = fmt.Sprintf("cycle %d: the append acked at %d is gone (log of %d batches)", cycle, a.off, len(log))
				}
			}
		}
		acked = acked[:0]
		for _, b := range log { // the log as it is now is what later cycles must keep
			acked = append(acked, powerAck{b.BaseOffset, b.Payload})
		}

		target := 20 + rng.IntN(200)
		pause := time.Duration(rng.IntN(3000)) * time.Microsecond
		sizes := rand.New(rand.NewPCG(seed, uint64(cycle)))
		var mu sync.Mutex
		n := 0
		var failed atomic.Bool
		reached := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			type inflight struct {
				f *stream.AppendFuture
				p []byte
			}
			futs := make(chan inflight, 8) // up to 8 appends in flight
			go func() {
				defer close(futs)
				for i := 0; !failed.Load(); i++ {
					p := bytes.Repeat([]byte(strconv.Itoa(cycle*100000+i)+"."), 1+sizes.IntN(300))
					futs <- inflight{st.Append(ctx, stream.Batch{Count: 1, Payload: p}), p}
				}
			}()
			for a := range futs {
				r, err := a.f.Wait(ctx)
				if err != nil {
					failed.Store(true) // the cut: every later append fails too
					continue
				}
				p := a.p
				mu.Lock()
				acked = append(acked, powerAck{r.BaseOffset, p})
				if n++; n == target {
					close(reached)
				}
				mu.Unlock()
			}
		}()
		select {
		case <-reached:
		case <-done:
			t.Fatalf("cycle %d: appends failed before %d acks", cycle, target)
		}
		time.Sleep(pause)
		fsys.Cut()
		<-done
		_ = st.Close()
		_ = store.Close()
		if err := fsys.Unmount(); err != nil {
			t.Fatal(err)
		}
		fsys.Restart()
		if err := fsys.Mount(mnt); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		res.acks += n
		mu.Unlock()
		res.cycles++
	}
	return res
}

// driverOpener opens the nfs driver with the data directory created by
// the driver (create_root).
func driverOpener(fsync bool) func(context.Context, string) (*stream.Store, error) {
	return func(ctx context.Context, root string) (*stream.Store, error) {
		return openConfig(ctx, Config{Root: root, CreateRoot: true, Fsync: &fsync, DirectIO: new(bool)})
	}
}

func powerLossRuns() int {
	if v, err := strconv.Atoi(os.Getenv("STRATA_POWER_CYCLES")); err == nil && v > 0 {
		return v
	}
	return 30
}

// TestPowerLoss: through a FUSE layer that keeps only what was fsynced
// (file data after an fsync of the file, a directory entry after an fsync
// of its directory) and drops the rest at a simulated power cut, no append
// acked before a cut is ever lost, over 30 cycles (STRATA_POWER_CYCLES),
// with the data directory made by the driver.
func TestPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("power cycles through a FUSE layer: full tier")
	}
	res := powerLossCycles(t, powerLossRuns(), driverOpener(true), 1)
	t.Logf("%d power cycles, %d acks, %d lost", res.cycles, res.acks, res.lost)
	if res.lost > 0 {
		t.Fatalf("%d acked appends lost at power cuts; first: %s", res.lost, res.firstLoss)
	}
}

// TestPowerLossCatchesSkippedFsync: the same cycles with fsync off (the
// driver skips every fsync) lose acked appends: the test can fail.
func TestPowerLossCatchesSkippedFsync(t *testing.T) {
	if testing.Short() {
		t.Skip("power cycles through a FUSE layer: full tier")
	}
	res := powerLossCycles(t, 3, driverOpener(false), 2)
	t.Logf("fsync off: %d power cycles, %d acks, %d lost; first: %s", res.cycles, res.acks, res.lost, res.firstLoss)
	if res.lost == 0 {
		t.Fatal("no acked append lost with fsync off: the power-loss layer does not drop unsynced data")
	}
}
