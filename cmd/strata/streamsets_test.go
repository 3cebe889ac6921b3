package main

import (
	"bytes"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/drivers/memory"
)

// TestStreamSetsOptions checks each driver's stream-set defaults and that
// a config's values, top level or per driver, win over them.
func TestStreamSetsOptions(t *testing.T) {
	parse := func(src string) *streamSetsConfig {
		t.Helper()
		var c streamSetsConfig
		if err := yaml.Unmarshal([]byte(src), &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	for _, tc := range []struct {
		kind, top, own string
		cpus           int // 0: 2
		linger         time.Duration
		idle           bool
		par            int
		yield          time.Duration
	}{
		{kind: "nfs", linger: 0, idle: true, par: 1},
		{kind: "hdfs", linger: 0, idle: true, par: 0},
		{kind: "memory", linger: 0, idle: true, par: 0},
		{kind: "s3", linger: 50 * time.Millisecond, idle: false, par: 0},
		{kind: "", linger: 50 * time.Millisecond, idle: false, par: 0},
		{kind: "nfs", top: "{compact_parallelism: 3}", linger: 0, idle: true, par: 3},
		{kind: "nfs", top: "{compact_parallelism: 3}", own: "{compact_parallelism: 2, linger: 7ms}", linger: 7 * time.Millisecond, idle: true, par: 2},
		{kind: "s3", own: "{flush_when_idle: true, compact_parallelism: 8}", linger: 50 * time.Millisecond, idle: true, par: 8},
		{kind: "nfs", cpus: 1, linger: 0, idle: true, par: 1, yield: 20 * time.Millisecond},
		{kind: "memory", cpus: 1, linger: 0, idle: true, par: 0, yield: 20 * time.Millisecond},
		{kind: "s3", cpus: 1, linger: 50 * time.Millisecond, idle: false, par: 0},
		{kind: "nfs", cpus: 1, own: "{compact_yield: -1ms}", linger: 0, idle: true, par: 1, yield: -time.Millisecond},
		{kind: "nfs", top: "{compact_yield: 5ms}", linger: 0, idle: true, par: 1, yield: 5 * time.Millisecond},
	} {
		var top, own *streamSetsConfig
		if tc.top != "" {
			top = parse(tc.top)
		}
		if tc.own != "" {
			own = parse(tc.own)
		}
		cpus := tc.cpus
		if cpus == 0 {
			cpus = 2
		}
		o := streamSetsOptions(tc.kind, own.merged(top), cpus)
		if o.Linger != tc.linger || o.FlushWhenIdle != tc.idle || o.CompactParallelism != tc.par || o.CompactYield != tc.yield {
			t.Errorf("kind %q, %d CPUs, top %q, own %q: linger %v, flush when idle %v, compact parallelism %d, compact yield %v; want %v, %v, %d, %v",
				tc.kind, cpus, tc.top, tc.own, o.Linger, o.FlushWhenIdle, o.CompactParallelism, o.CompactYield, tc.linger, tc.idle, tc.par, tc.yield)
		}
	}
}

// TestStreamSetsOneCPUAfterProcs: serve doubles GOMAXPROCS before it
// opens its stores (setBrokerProcs), and a broker on one CPU still gets
// the one-CPU defaults: they follow the CPUs, not GOMAXPROCS.
func TestStreamSetsOneCPUAfterProcs(t *testing.T) {
	oldCPUs, oldProcs := defaultProcs, runtime.GOMAXPROCS(0)
	env, envSet := os.LookupEnv("GOMAXPROCS")
	t.Cleanup(func() {
		defaultProcs = oldCPUs
		runtime.GOMAXPROCS(oldProcs)
		if envSet {
			os.Setenv("GOMAXPROCS", env)
		}
	})
	os.Unsetenv("GOMAXPROCS")
	for _, tc := range []struct {
		cpus  int
		yield string
	}{{1, "compact_yield=20ms"}, {2, "compact_yield=0s"}} {
		defaultProcs = tc.cpus
		setBrokerProcs(slog.New(slog.DiscardHandler))
		if got := runtime.GOMAXPROCS(0); got != 2*tc.cpus {
			t.Fatalf("%d CPUs: GOMAXPROCS %d after setBrokerProcs, want %d", tc.cpus, got, 2*tc.cpus)
		}
		var log bytes.Buffer
		st, err := withStreamSets("memory", "memory", memory.New(memory.Config{}), streamSetsConfig{}, "", slog.New(slog.NewTextHandler(&log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		if !strings.Contains(log.String(), tc.yield) {
			t.Errorf("%d CPUs: the stream sets' log says %q, want %s", tc.cpus, log.String(), tc.yield)
		}
	}
}
