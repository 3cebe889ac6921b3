package nfs

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// crashWriterEnv turns the test binary into the crash test's writer
// process: "<round> <epoch>".
const crashWriterEnv = "STRATA_NFS_CRASH_WRITER"

// crashBatch is batch i of a round: its count, timestamp and bytes are a
// function of (round, i), so the parent can check what it reads without the
// writer telling it more than the offsets.
func crashBatch(round, i int) stream.Batch {
	// 400,000 bytes: a chunk holding it goes out with O_DIRECT (DirectMinBytes).
	size := []int{10, 700, 3000, 65_000, 150, 400_000}[i%6]
	p := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(round), uint64(i)))
	for j := range p {
		p[j] = byte(r.Uint32())
	}
	copy(p, fmt.Sprintf("r%d#%d:", round, i))
	return stream.Batch{Count: uint32(1 + i%3), Timestamp: int64(round)*1_000_000 + int64(i), Payload: p}
}

// crashAck is an append the writer reported acknowledged.
type crashAck struct {
	round, i int
	base     int64
}

// TestCrashSIGKILL: a writer process appends continuously (pipelined) and
// reports every ack to the parent over a pipe; the parent SIGKILLs it at a
// random moment, then opens the stream as a new owner with a higher epoch
// and checks that every batch ever acked is there with identical bytes at
// its offset, and that the dead writer's torn temp files were removed.
// STRATA_CRASH_ROUNDS sets the number of rounds (default 50); STRATA_SEED
// replays a schedule.
func TestCrashSIGKILL(t *testing.T) {
	if os.Getenv(crashWriterEnv) != "" {
		crashWriter(t)
		return
	}
	rounds := 50
	if n, err := strconv.Atoi(os.Getenv("STRATA_CRASH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv("STRATA_SEED"), 10, 64); err == nil && s != 0 {
		seed = s
	}
	t.Logf("seed %d (replay with STRATA_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	root := freshRoot(t)
	config := configFor(root, "max_inflight_chunks: 4")
	const name = "crash/s"
	var acks []crashAck
	torn, noAcks := 0, 0
	for round := range rounds {
		epoch := uint64(2*round + 1)
		// Kill after a random number of acks (sometimes none: during open)
		// plus a random extra delay.
		killAfterAcks := rng.IntN(40)
		if rng.IntN(8) == 0 {
			killAfterAcks = 0
		}
		extra := time.Duration(rng.IntN(15_000)) * time.Microsecond
		got, pid, err := runCrashWriter(config, round, epoch, killAfterAcks, extra)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(got) == 0 {
			noAcks++ // killed while opening or before the first ack
		}
		acks = append(acks, got...)
		mine := tempFilesOf(t, root, pid)
		torn += len(mine)

		// A new owner: open (which cleans torn temp files), fence with a
		// higher epoch, read everything.
		store, err := Open(t.Context(), config)
		if err != nil {
			t.Fatalf("round %d: reopening the store: %v", round, err)
		}
		if left := tempFilesOf(t, root, pid); len(left) > 0 {
			t.Fatalf("round %d: torn temp files of the killed writer (pid %d) survived a new open: %q", round, pid, left)
		}
		st, err := store.Open(t.Context(), name, stream.OpenOptions{Epoch: epoch + 1, CreateIfMissing: true})
		if err != nil {
			t.Fatalf("round %d: new owner open at epoch %d: %v", round, epoch+1, err)
		}
		log, err := readLog(t, st)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		at := make(map[int64]stream.Batch, len(log))
		for _, b := range log {
			at[b.BaseOffset] = b
		}
		for _, a := range acks {
			want := crashBatch(a.round, a.i)
			b, ok := at[a.base]
			switch {
			case !ok:
				t.Fatalf("round %d (seed %d): batch %d of round %d acked at offset %d is missing (log has %d batches, next offset %d)", round, seed, a.i, a.round, a.base, len(log), st.NextOffset())
			case b.Count != want.Count || b.Timestamp != want.Timestamp || !bytes.Equal(b.Payload, want.Payload):
				t.Fatalf("round %d (seed %d): offset %d holds %q (count %d), not batch %d of round %d that was acked there", round, seed, a.base, b.Payload[:min(len(b.Payload), 12)], b.Count, a.i, a.round)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		if err := store.Close(); err != nil {
			t.Fatalf("round %d: store close: %v", round, err)
		}
	}
	t.Logf("%d rounds: %d acked batches checked, %d torn temp files found and removed, %d rounds killed before any ack", rounds, len(acks), torn, noAcks)
	if len(acks) == 0 {
		t.Fatal("no append was acked in any round: the test checked nothing")
	}
}

// readLog fetches the whole stream and checks that it is contiguous.
func readLog(t testing.TB, st *stream.Stream) ([]stream.Batch, error) {
	var log []stream.Batch
	next := st.StartOffset()
	for {
		bs, err := st.Fetch(t.Context(), next, stream.NoEnd, 0)
		if err != nil {
			return log, fmt.Errorf("fetch from %d: %w", next, err)
		}
		if len(bs) == 0 {
			if next != st.NextOffset() {
				return log, fmt.Errorf("read ended at %d, next offset is %d", next, st.NextOffset())
			}
			return log, nil
		}
		for _, b := range bs {
			if b.BaseOffset != next {
				return log, fmt.Errorf("batch at %d where %d was expected (gap or overlap)", b.BaseOffset, next)
			}
			next = b.EndOffset()
		}
		log = append(log, bs...)
	}
}

// tempFilesOf lists the temp files of process pid of this host.
func tempFilesOf(t *testing.T, root string, pid int) []string {
	t.Helper()
	var out []string
	dir := filepath.Join(root, tmpDir)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		// The writer was killed before its storage made tmp/: no temp files.
		return nil
	}
	for _, name := range dirNames(t, dir) {
		if host, p, ok := tempOwner(name); ok && host == hostID() && p == pid {
			out = append(out, name)
		}
	}
	return out
}

// runCrashWriter starts a writer process, lets it run until it reported
// killAfterAcks acks and then extra longer, SIGKILLs it, and returns every
// ack it reported and its pid.
func runCrashWriter(config []byte, round int, epoch uint64, killAfterAcks int, extra time.Duration) ([]crashAck, int, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashSIGKILL$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d", crashWriterEnv, round, epoch))
	cmd.Stdin = strings.NewReader(base64.StdEncoding.EncodeToString(config) + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	var (
		mu      sync.Mutex
		acks    []crashAck
		other   []string
		reached = make(chan struct{})
		once    sync.Once
		done    = make(chan struct{})
	)
	if killAfterAcks == 0 {
		once.Do(func() { close(reached) })
	}
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var i int
			var base int64
			if _, err := fmt.Sscanf(sc.Text(), "ack %d %d", &i, &base); err != nil {
				mu.Lock()
				other = append(other, sc.Text())
				mu.Unlock()
				continue
			}
			mu.Lock()
			acks = append(acks, crashAck{round: round, i: i, base: base})
			n := len(acks)
			mu.Unlock()
			if n >= killAfterAcks {
				once.Do(func() { close(reached) })
			}
		}
	}()
	select {
	case <-reached:
	case <-done: // the writer ended by itself: a failure, reported below
	case <-time.After(time.Minute):
	}
	time.Sleep(extra)
	cmd.Process.Kill()
	<-done // everything written to the pipe before the kill is read
	werr := cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	if ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); !ok || !ws.Signaled() {
		return acks, cmd.Process.Pid, fmt.Errorf("writer process ended by itself (%v) before the kill:\n%s\n%s", werr, strings.Join(other, "\n"), stderr.String())
	}
	return acks, cmd.Process.Pid, nil
}

// crashWriter is the writer process: it opens the stream at its epoch and
// appends pipelined batches until killed, printing "ack I BASE" for every
// acknowledged batch I as soon as its ack arrives.
func crashWriter(t *testing.T) {
	var round int
	var epoch uint64
	if _, err := fmt.Sscanf(os.Getenv(crashWriterEnv), "%d %d", &round, &epoch); err != nil {
		t.Fatalf("bad %s: %v", crashWriterEnv, err)
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	config, err := base64.StdEncoding.DecodeString(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	store, err := Open(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, "crash/s", stream.OpenOptions{Epoch: epoch, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	futs := make(chan *stream.AppendFuture, 16)
	go func() {
		for i := 0; ; i++ {
			futs <- st.Append(ctx, crashBatch(round, i))
		}
	}()
	deadline := time.Now().Add(2 * time.Minute) // never outlive a lost parent for long
	for i := 0; time.Now().Before(deadline); i++ {
		r, err := (<-futs).Wait(ctx)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		// One write(2) per ack line, straight to the pipe: no buffering
		// that a SIGKILL could lose after the ack was reported.
		fmt.Fprintf(os.Stdout, "ack %d %d\n", i, r.BaseOffset)
	}
}
