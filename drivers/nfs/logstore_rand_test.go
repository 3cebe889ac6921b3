package nfs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stratastream/strata/stream"
)

// TestLogStoreRandomized runs random schedules of the operations that
// meet in a LogStore stream, on three stores over one directory (as three
// processes), with segments of 2 KiB and index points every 300 bytes, so
// that appends roll segments and trims remove them and punch them out: appends by the owner and by sessions it fenced, takeovers
// at lower, equal and higher epochs, trims, sessions dropped without
// Close (a crash), read-only readers. After every step a fresh reader
// checks the contract: the log is contiguous from its start, every
// acknowledged append at or above the start is there with its bytes, the
// start never goes back and covers every trim that succeeded. A failing
// seed replays with STRATA_LOGSIM_SEED; STRATA_LOGSIM_SEEDS runs more.
func TestLogStoreRandomized(t *testing.T) {
	first, seeds := logSimSeeds(200, 40)
	steps, total := 150, 0
	for seed := first; seed < first+uint64(seeds); seed++ {
		total += logSim(t, seed, steps, logSimConfig{opts: LogOptions{SegmentBytes: 2 << 10, PreallocBytes: 512, IndexBytes: 300, NoFsync: true}, maxPay: 900})
	}
	t.Logf("%d schedules, %d steps, 0 violations", seeds, total)
}

// TestLogStoreRandomizedFramed is TestLogStoreRandomized with half the
// appends written in place (AppendFill: frames in buffers of their own,
// written direct with a pad frame each), bursts of appends in flight at
// once (groups of several frames), and segments and batches sized so that
// framed groups, gathered ones and page-cache writes alternate, roll
// segments and set index points. With fsync, as a store without it writes
// nothing direct.
func TestLogStoreRandomizedFramed(t *testing.T) {
	if directAlign(mustCreate(t)) == 0 {
		t.Fatalf("the test directory's file system refuses O_DIRECT: the framed path cannot run")
	}
	first, seeds := logSimSeeds(100, 20)
	steps, total, framed := 150, 0, int64(0)
	for seed := first; seed < first+uint64(seeds); seed++ {
		cfg := logSimConfig{opts: LogOptions{SegmentBytes: 64 << 10, PreallocBytes: 16 << 10, IndexBytes: 6 << 10, DirectMinBytes: 3 << 10}, maxPay: 12 << 10, fill: true, framed: new(atomic.Int64)}
		total += logSim(t, seed, steps, cfg)
		framed += cfg.framed.Load()
	}
	if framed == 0 {
		t.Fatalf("no group was written from its frames' own buffers")
	}
	t.Logf("%d schedules, %d steps, %d framed writes, 0 violations", seeds, total, framed)
}

// logSimSeeds is the first seed and how many a randomized test runs: n
// (short under -short), STRATA_LOGSIM_SEEDS if set, or the one of
// STRATA_LOGSIM_SEED.
func logSimSeeds(n, short int) (uint64, int) {
	if testing.Short() {
		n = short
	}
	if v, err := strconv.Atoi(os.Getenv("STRATA_LOGSIM_SEEDS")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.ParseUint(os.Getenv("STRATA_LOGSIM_SEED"), 10, 64); err == nil {
		return v, 1
	}
	return 1, n
}

// mustCreate creates a file in a test directory.
func mustCreate(t *testing.T) *os.File {
	f, err := os.Create(t.TempDir() + "/probe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

type logSimConfig struct {
	opts   LogOptions
	maxPay int  // payloads of up to maxPay bytes (and a tag)
	fill   bool // half the appends by AppendFill, in bursts in flight at once
	framed *atomic.Int64
}

type logSimSession struct {
	st    *stream.Stream
	epoch uint64
}

func logSim(t *testing.T, seed uint64, steps int, cfg logSimConfig) int {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 11))
	root := t.TempDir()
	var stores []*stream.Store
	for range 3 {
		d, err := NewLogStore(root, cfg.opts)
		if err != nil {
			t.Fatal(err)
		}
		s := stream.NewStore(d)
		defer func() {
			s.Close()
			if cfg.framed != nil {
				cfg.framed.Add(d.framedWrites.Load())
			}
		}()
		stores = append(stores, s)
	}
	fail := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d: %s (replay: STRATA_LOGSIM_SEED=%d)", seed, step, fmt.Sprintf(format, args...), seed)
	}
	acked := map[int64][]byte{} // base offset -> payload of acknowledged appends
	var sessions []logSimSession
	owner := -1 // the session of the newest open, until it crashes
	var readers []*stream.Stream
	maxEpoch := uint64(1)
	trimmed, seenStart := int64(0), int64(0)
	n := 0
	for step := range steps {
		switch op := rng.IntN(10); {
		case op < 2 || len(sessions) == 0: // take over
			e := maxEpoch
			switch rng.IntN(3) {
			case 0:
				e = max(1, e-1)
			case 1:
				e++
			}
			st, err := stores[rng.IntN(len(stores))].Open(ctx, "s", stream.OpenOptions{Epoch: e, CreateIfMissing: true})
			switch {
			case err == nil:
				sessions = append(sessions, logSimSession{st, e})
				owner = len(sessions) - 1
				maxEpoch = max(maxEpoch, e)
			case errors.Is(err, stream.ErrFenced) && e < maxEpoch:
			default:
				fail(step, "open at epoch %d (highest %d): %v", e, maxEpoch, err)
			}
		case op < 6: // appends, by any session; only the newest may succeed
			i := rng.IntN(len(sessions))
			burst := cfg.fill && rng.IntN(2) == 0
			k := 1 + rng.IntN(4)
			futs, pays := make([]*stream.AppendFuture, k), make([][]byte, k)
			for j := range k {
				n++
				p := []byte(fmt.Sprintf("s%d-a%d-%s", seed, n, make([]byte, rng.IntN(cfg.maxPay))))
				for x := len(p) - min(len(p), 64); x < len(p); x++ {
					p[x] = byte(rng.Uint32()) // not all zeros
				}
				b := stream.Batch{Count: 1 + uint32(rng.IntN(2))}
				pays[j] = p
				if cfg.fill && rng.IntN(2) == 0 {
					f, ok := sessions[i].st.AppendFill(ctx, b, len(p), func(d []byte) uint32 { copy(d, p); return stream.Checksum(p) })
					if ok {
						futs[j] = f
					}
				}
				if futs[j] == nil {
					b.Payload = p
					futs[j] = sessions[i].st.Append(ctx, b)
				}
				if !burst {
					futs[j].Wait(ctx)
				}
			}
			for j, f := range futs {
				p := pays[j]
				r, err := f.Result()
				if err != nil {
					if i == owner {
						fail(step, "append by the owner: %v", err)
					}
					break
				}
				if i != owner {
					fail(step, "a fenced session's append was acknowledged at %d", r.BaseOffset)
				}
				if _, dup := acked[r.BaseOffset]; dup {
					fail(step, "offset %d acknowledged twice", r.BaseOffset)
				}
				acked[r.BaseOffset] = p
			}
		case op < 7 && owner >= 0: // trim by the owner
			o := sessions[owner].st
			lo, hi := o.StartOffset(), o.NextOffset()
			to := lo + rng.Int64N(hi-lo+1)
			if err := o.Trim(ctx, to); err != nil {
				fail(step, "trim to %d of [%d, %d): %v", to, lo, hi, err)
			}
			trimmed = max(trimmed, to)
		case op < 8 && owner >= 0: // the owner crashes: dropped without Close
			sessions = append(sessions[:owner], sessions[owner+1:]...)
			owner = -1
		case op < 9: // a reader opens, or an old one reads on
			if len(readers) == 0 || rng.IntN(2) == 0 {
				r, err := stores[rng.IntN(len(stores))].Open(ctx, "s", stream.OpenOptions{Mode: stream.ModeReadOnly})
				if err != nil {
					fail(step, "read-only open: %v", err)
				}
				readers = append(readers, r)
			}
			r := readers[rng.IntN(len(readers))]
			logSimCheck(ctx, r, acked, 0, func(f string, a ...any) { fail(step, "an old reader: "+f, a...) })
		default:
			if i := rng.IntN(len(sessions)); i != owner { // a fenced session closes
				_ = sessions[i].st.Close()
				sessions = append(sessions[:i], sessions[i+1:]...)
				if owner > i {
					owner--
				}
			}
		}
		r, err := stores[rng.IntN(len(stores))].Open(ctx, "s", stream.OpenOptions{Mode: stream.ModeReadOnly})
		if errors.Is(err, stream.ErrNotFound) && len(acked) == 0 {
			continue
		}
		if err != nil {
			fail(step, "read-only open: %v", err)
		}
		lo := logSimCheck(ctx, r, acked, trimmed, func(f string, a ...any) { fail(step, f, a...) })
		if lo < seenStart {
			fail(step, "the start went back from %d to %d", seenStart, lo)
		}
		seenStart = lo
		_ = r.Close()
	}
	return steps
}

// logSimCheck reads r whole and checks it against the acknowledged
// appends; trimmed is a start it must have reached. It returns the start.
func logSimCheck(ctx context.Context, r *stream.Stream, acked map[int64][]byte, trimmed int64, fail func(string, ...any)) int64 {
	lo, hi := r.StartOffset(), r.NextOffset()
	if lo < trimmed {
		fail("start %d below a trim to %d that succeeded", lo, trimmed)
	}
	got := map[int64]bool{}
	for pos := lo; pos < hi; {
		bs, err := r.Fetch(ctx, pos, stream.NoEnd, 0)
		if errors.Is(err, stream.ErrOffsetOutOfRange) && trimmed == 0 {
			return lo // an old reader behind a later trim
		}
		if err != nil || len(bs) == 0 {
			fail("fetch at %d of [%d, %d): %d batches, %v", pos, lo, hi, len(bs), err)
		}
		for _, b := range bs {
			// The first may start below a start inside it.
			if b.BaseOffset != pos && !(pos == lo && b.BaseOffset < pos && b.EndOffset() > pos) {
				fail("batch at [%d, %d), want one at %d", b.BaseOffset, b.EndOffset(), pos)
			}
			pos = b.BaseOffset
			if p, ok := acked[pos]; ok && string(p) != string(b.Payload) {
				fail("offset %d holds other bytes than its acknowledged append", pos)
			}
			got[pos] = true
			pos = b.EndOffset()
		}
	}
	for off := range acked {
		if off >= lo && off < hi && !got[off] {
			fail("acknowledged append at %d missing from [%d, %d)", off, lo, hi)
		}
	}
	return lo
}
