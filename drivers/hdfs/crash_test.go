package hdfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// crashChildEnv makes the test binary a crashing writer: it reads a config
// from standard input and loops PutIfAbsent of crashData objects, printing
// "acked KEY" after each success, until it is killed.
const crashChildEnv = "STRATA_HDFS_CRASH_CHILD"

// crashData is the content of key crash/<round>/<i>: a length that varies
// from 100 KiB to over 1 MiB (several DataNode packets, so a kill lands
// mid-write), and bytes derived from the key.
func crashData(key string, i int) []byte {
	b := make([]byte, 100<<10+(i*7919)%(1<<20))
	r := rand.NewChaCha8([32]byte([]byte(fmt.Sprintf("%-32s", key))[:32]))
	r.Read(b)
	return b
}

// TestCrashMidPut SIGKILLs a writer process in the middle of puts, round
// after round. Afterwards every acknowledged object reads back whole, every
// listed key holds exactly its full content (no torn or unclosed file is
// ever at a key), and what the dead writers left in the temp area is swept.
func TestCrashMidPut(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild(t)
		return
	}
	cfg := freshConfig(t)
	config := marshal(t, cfg)
	ctx := context.Background()
	acked := map[string]bool{}
	const rounds = 8
	for round := range rounds {
		// Let it ack a few puts, then kill it at a random moment.
		n := 0
		lines, _, err := drivertest.KillChild("TestCrashMidPut", crashChildEnv+"="+strconv.Itoa(round), config,
			func(l string) bool {
				if strings.HasPrefix(l, "acked ") {
					n++
				}
				return n >= 3
			}, time.Duration(rand.IntN(80))*time.Millisecond)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, l := range lines {
			if k, ok := strings.CutPrefix(l, "acked "); ok {
				acked[k] = true
			}
		}
		if n == 0 {
			t.Fatalf("round %d: the writer acked nothing", round)
		}
	}

	st, err := OpenStorage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys, err := st.List(ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for k := range acked {
		if _, err := st.Stat(ctx, k); err != nil {
			t.Errorf("acked object %s: %v", k, err)
		}
	}
	for _, k := range keys {
		i, _ := strconv.Atoi(k[strings.LastIndex(k, "/")+1:])
		b, err := st.Get(ctx, k, 0, -1)
		if want := crashData(k, i); err != nil || !bytes.Equal(b, want) {
			t.Errorf("object %s: %d bytes (want %d), %v: torn or wrong", k, len(b), len(want), err)
		}
	}
	left, err := st.pool.pick().ReadDir(st.tmp)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rounds: %d acked, %d objects listed, all whole; %d temp entries left by killed writers", rounds, len(acked), len(keys), len(left))

	// The leftovers (unclosed files among them) are swept once old enough.
	sweepCfg := cfg
	sweepCfg.Timeouts.Operation = time.Second
	sweepCfg.TempMaxAge = 2 * time.Second
	time.Sleep(sweepCfg.TempMaxAge + 500*time.Millisecond)
	st2, err := OpenStorage(ctx, sweepCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if left, err := st2.pool.pick().ReadDir(st2.tmp); err != nil || len(left) != 0 {
		t.Errorf("temp area after the sweep: %d entries, %v; want none", len(left), err)
	}
}

// crashChild is the writer TestCrashMidPut kills.
func crashChild(t *testing.T) {
	config, err := io.ReadAll(os.Stdin)
	if err != nil {
		t.Fatal(err)
	}
	st, err := opener.OpenStorage(context.Background(), config)
	if err != nil {
		t.Fatal(err)
	}
	round := os.Getenv(crashChildEnv)
	for i := 0; ; i++ {
		k := fmt.Sprintf("crash/%s/%d", round, i)
		if err := st.PutIfAbsent(context.Background(), k, crashData(k, i)); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("acked %s\n", k)
	}
}
