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
		linger         time.Duration
		idle           bool
		par            int
	}{
		{kind: "nfs", linger: 0, idle: true, par: 1},
		{kind: "hdfs", linger: 0, idle: true, par: 0},
		{kind: "memory", linger: 0, idle: true, par: 0},
		{kind: "s3", linger: 50 * time.Millisecond, idle: false, par: 0},
		{kind: "", linger: 50 * time.Millisecond, idle: false, par: 0},
		{kind: "nfs", top: "{compact_parallelism: 3}", linger: 0, idle: true, par: 3},
		{kind: "nfs", top: "{compact_parallelism: 3}", own: "{compact_parallelism: 2, linger: 7ms}", linger: 7 * time.Millisecond, idle: true, par: 2},
		{kind: "s3", own: "{flush_when_idle: true, compact_parallelism: 8}", linger: 50 * time.Millisecond, idle: true, par: 8},
	} {
		var top, own *streamSetsConfig
		if tc.top != "" {
			top = parse(tc.top)
		}
		if tc.own != "" {
			own = parse(tc.own)
		}
		o := streamSetsOptions(tc.kind, own.merged(top))
		if o.Linger != tc.linger || o.FlushWhenIdle != tc.idle || o.CompactParallelism != tc.par {
			t.Errorf("kind %q, top %q, own %q: linger %v, flush when idle %v, compact parallelism %d; want %v, %v, %d",
				tc.kind, tc.top, tc.own, o.Linger, o.FlushWhenIdle, o.CompactParallelism, tc.linger, tc.idle, tc.par)
		}
	}
}
