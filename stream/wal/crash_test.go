package wal_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/wal"
)

// The crash test: a writer process holding many virtual streams on the
// nfs driver (a local directory, fsync on) appends to all of them until it
// is SIGKILLed at a random moment; the next process takes the streams over
// at a higher epoch and goes on. In the end every acknowledged batch must
// be in its stream exactly once, at its acknowledged offset, with its
// bytes.

const (
	crashChildEnv = "STRATA_WAL_CRASH_CHILD"
	crashStreams  = 8
)

func crashPayload(round, stream, seq, size int) []byte {
	p := fmt.Appendf(nil, "r%d s%d q%d ", round, stream, seq)
	for len(p) < size {
		p = append(p, byte('a'+(round+seq+len(p))%26))
	}
	return p
}

// crashOpenStore opens the stream sets of the crash test on dir, with the
// WALs in an nfs.LogStore in it (as strata serve's embedded default) when
// files is set.
func crashOpenStore(t testing.TB, dir string, compact int64, files bool) *wal.Store {
	base, err := nfs.Open(context.Background(), fmt.Appendf(nil, "root: %q\n", dir))
	if err != nil {
		t.Fatal(err)
	}
	opts := wal.Options{CompactBytes: compact, SweepInterval: time.Second}
	if files {
		// Direct writes from 16 KiB: WAL batches of more are framed in
		// place (stream.Filler), as strata serve's of 256 KiB and more.
		if opts.WALStore, err = nfs.OpenLogStore(nfs.LogStoreDir(dir), nfs.LogOptions{SegmentBytes: 256 << 10, DirectMinBytes: 16 << 10}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := wal.NewStore(base, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCrashChild is the writer process; it runs only when re-executed by
// TestCrashSIGKILL.
func TestCrashChild(t *testing.T) {
	if os.Getenv(crashChildEnv) == "" {
		t.Skip("the writer process of TestCrashSIGKILL")
	}
	dir := os.Getenv("STRATA_WAL_CRASH_DIR")
	round, _ := strconv.Atoi(os.Getenv("STRATA_WAL_CRASH_ROUND"))
	s := crashOpenStore(t, dir, 64<<10, os.Getenv("STRATA_WAL_CRASH_FILES") == "1")
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	var sts []stream.DriverStream
	for i := range crashStreams {
		st, err := s.Open(ctx, fmt.Sprintf("crash/s%d", i), stream.OpenOptions{Epoch: uint64(round + 1), CreateIfMissing: true})
		if err != nil {
			fmt.Fprintf(out, "error open %d: %v\n", i, err)
			out.Flush()
			os.Exit(3)
		}
		sts = append(sts, st)
	}
	fmt.Fprintln(out, "ready")
	out.Flush()
	rng := rand.New(rand.NewPCG(uint64(round), 7))
	type pending struct {
		f                 *stream.AppendFuture
		stream, seq, size int
	}
	var q []pending
	for seq := 0; ; seq++ {
		i := rng.IntN(crashStreams)
		size := 16 + rng.IntN(2000)
		f := sts[i].Append(ctx, stream.Batch{Count: uint32(1 + rng.IntN(3)), Payload: crashPayload(round, i, seq, size)})
		q = append(q, pending{f, i, seq, size})
		for len(q) > 64 || (len(q) > 0 && q[0].f.Completed()) {
			p := q[0]
			q = q[1:]
			r, err := p.f.Result()
			if err == nil {
				fmt.Fprintf(out, "ack %d %d %d %d %d\n", p.stream, r.BaseOffset, r.NextOffset, p.seq, p.size)
				out.Flush()
			}
		}
	}
}

func TestCrashSIGKILL(t *testing.T) { crashSIGKILL(t, false) }

// TestCrashSIGKILLWALFiles is the same with the WALs in an nfs.LogStore
// (appended in place, fenced by open records: docs/streamsets.md, "WAL
// store").
func TestCrashSIGKILLWALFiles(t *testing.T) { crashSIGKILL(t, true) }

func crashSIGKILL(t *testing.T, files bool) {
	kills := 60
	if testing.Short() {
		kills = 8
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	type ack struct {
		round, stream, seq, size int
		base, next               int64
	}
	var acks []ack
	for round := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), crashChildEnv+"=1", "STRATA_WAL_CRASH_DIR="+dir, "STRATA_WAL_CRASH_ROUND="+strconv.Itoa(round),
			"STRATA_WAL_CRASH_FILES="+map[bool]string{true: "1", false: "0"}[files])
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || sc.Text() != "ready" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("round %d: writer did not start: %q %s", round, sc.Text(), stderr.String())
		}
		timer := time.AfterFunc(time.Duration(5+rng.IntN(250))*time.Millisecond, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 6 || f[0] != "ack" {
				continue
			}
			var a ack
			a.round = round
			a.stream, _ = strconv.Atoi(f[1])
			a.base, _ = strconv.ParseInt(f[2], 10, 64)
			a.next, _ = strconv.ParseInt(f[3], 10, 64)
			a.seq, _ = strconv.Atoi(f[4])
			a.size, _ = strconv.Atoi(f[5])
			acks = append(acks, a)
		}
		timer.Stop()
		_ = cmd.Wait()
	}
	// A new owner opens every stream (at the highest epoch) and reads it.
	s := crashOpenStore(t, dir, 64<<20, files)
	defer s.Close()
	ctx := context.Background()
	logs := make([]map[int64]stream.Batch, crashStreams)
	for i := range crashStreams {
		st, err := s.Open(ctx, fmt.Sprintf("crash/s%d", i), stream.OpenOptions{Epoch: uint64(kills + 1)})
		if err != nil {
			t.Fatalf("final open of stream %d: %v", i, err)
		}
		logs[i] = map[int64]stream.Batch{}
		seen := map[string]bool{}
		for pos := st.StartOffset(); pos < st.NextOffset(); {
			bs, err := st.Fetch(ctx, pos, stream.NoEnd, 0)
			if err != nil || len(bs) == 0 {
				t.Fatalf("stream %d: fetch at %d of %d: %d batches, %v", i, pos, st.NextOffset(), len(bs), err)
			}
			for _, b := range bs {
				if b.BaseOffset != pos {
					t.Fatalf("stream %d: batch at %d, want %d (a gap or overlap)", i, b.BaseOffset, pos)
				}
				id := string(bytes.Fields(b.Payload)[0]) + " " + string(bytes.Fields(b.Payload)[2])
				if seen[id] {
					t.Fatalf("stream %d: append %s appears twice (again at %d)", i, id, b.BaseOffset)
				}
				seen[id] = true
				logs[i][b.BaseOffset] = b
				pos = b.EndOffset()
			}
		}
		_ = st.Close()
	}
	for _, a := range acks {
		b, ok := logs[a.stream][a.base]
		if !ok || b.EndOffset() != a.next {
			t.Fatalf("acked append r%d q%d of stream %d at [%d, %d) is not in the log (found %v)", a.round, a.seq, a.stream, a.base, a.next, ok)
		}
		if want := crashPayload(a.round, a.stream, a.seq, a.size); !bytes.Equal(b.Payload, want) {
			t.Fatalf("acked append r%d q%d of stream %d at %d: other bytes in the log", a.round, a.seq, a.stream, a.base)
		}
	}
	t.Logf("%d SIGKILLs: %d acked batches verified in %d streams", kills, len(acks), crashStreams)
	if len(acks) == 0 {
		t.Fatal("no append was acknowledged: the test checked nothing")
	}
}
