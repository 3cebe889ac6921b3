package drivertest

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInterleave checks that kinds alternate, the order reversed every
// other round, and that each kind's slices add up.
func TestInterleave(t *testing.T) {
	var order []string
	kind := func(name string, bytes int64) *Kind {
		return &Kind{Name: name, Run: func(d time.Duration) (int64, time.Duration, []time.Duration) {
			order = append(order, name)
			return bytes, d, []time.Duration{time.Millisecond}
		}}
	}
	a, b := kind("a", 1e6), kind("b", 2e6)
	Interleave([]*Kind{a, b}, 3, time.Second)
	if want := []string{"a", "b", "b", "a", "a", "b"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if a.Bytes() != 3e6 || a.MBps() != 1 || b.MBps() != 2 {
		t.Errorf("a: %d bytes, %.2f MB/s; b: %.2f MB/s; want 3e6, 1, 2", a.Bytes(), a.MBps(), b.MBps())
	}
	if p := a.QuantileMs(0.99); p != 1 {
		t.Errorf("a p99 %.2f ms, want 1", p)
	}
}

// TestTable checks the header, the share and extra cells of a row.
func TestTable(t *testing.T) {
	raw := &Kind{Name: "raw", bytes: 4e6, elapsed: time.Second}
	app := &Kind{Name: "append", bytes: 3e6, elapsed: time.Second, Of: []*Kind{raw},
		Extra: func(k *Kind) []string { return []string{"x"} }}
	tb := NewTable([]string{"raw", "other"}, "extra")
	slow := &Kind{Name: "slow", bytes: 12345, elapsed: time.Second}
	tb.Add(64<<10, 16, []*Kind{raw, app, slow})
	lines := strings.Split(strings.TrimSpace(tb.String()), "\n")
	want := []string{
		"| size | streams | kind | MB/s | p50 ms | p99 ms | CPU µs/op | of raw | of other | extra |",
		"|---|---|---|---|---|---|---|---|---|---|",
		"| 64 KiB | 16 | raw | 4.0 | 0.00 | 0.00 | 0 |  |  |  |",
		"| 64 KiB | 16 | append | 3.0 | 0.00 | 0.00 | 0 | 75% |  | x |",
		"| 64 KiB | 16 | slow | 0.012 | 0.00 | 0.00 | 0 |  |  |  |",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("table:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestEnvInts checks the list parsing and the default.
func TestEnvInts(t *testing.T) {
	t.Setenv("STRATA_TEST_INTS", "1024, 65536,x,-1")
	if got := EnvInts("STRATA_TEST_INTS", 7); !slices.Equal(got, []int{1024, 65536}) {
		t.Errorf("EnvInts = %v, want [1024 65536]", got)
	}
	if got := EnvInts("STRATA_TEST_INTS_UNSET", 7, 8); !slices.Equal(got, []int{7, 8}) {
		t.Errorf("EnvInts unset = %v, want [7 8]", got)
	}
}
