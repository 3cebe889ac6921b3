package main

import (
	"testing"
	"time"

	"gopkg.in/yaml.v3"
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
