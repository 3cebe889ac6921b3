package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stratastream/strata/stream/chunked"
)

// Latencies are recorded in microseconds from 1 µs to 10 minutes with three
// significant digits.
const (
	histMinMicros = 1
	histMaxMicros = int64(10 * time.Minute / time.Microsecond)
	histDigits    = 3
)

// series counts one kind of operation of a phase (appends, reads, puts,
// produces): operations, payload bytes, records and a latency histogram.
type series struct {
	ops, bytes, records atomic.Int64
	mu                  sync.Mutex
	hist                *hdrhistogram.Histogram
}

// phase is one measured (or warm-up) interval.
type phase struct {
	start         time.Time
	series        []*series
	stats, server chunked.RequestStats
}

// meter is what a workload records into: the current phase, swapped by
// the runner between warm-up and runs, so that a workload never knows
// which phase it is in.
type meter struct {
	names []string
	cur   atomic.Pointer[phase]
	// stats reads the target's backend request counts, server the backend
	// server's own; nil when not counted.
	stats, server func() (chunked.RequestStats, bool)
	// totals are the bytes of each series over all phases.
	totals []atomic.Int64
}

func newMeter(names []string, stats, server func() (chunked.RequestStats, bool)) *meter {
	m := &meter{names: names, stats: stats, server: server, totals: make([]atomic.Int64, len(names))}
	m.cur.Store(m.newPhase())
	return m
}

func (m *meter) newPhase() *phase {
	p := &phase{start: time.Now(), series: make([]*series, len(m.names))}
	for i := range p.series {
		p.series[i] = &series{hist: hdrhistogram.New(histMinMicros, histMaxMicros, histDigits)}
	}
	if m.stats != nil {
		p.stats, _ = m.stats()
	}
	if m.server != nil {
		p.server, _ = m.server()
	}
	return p
}

// record counts one operation of series i that moved bytes bytes (records
// records) and took lat.
func (m *meter) record(i int, bytes, records int64, lat time.Duration) {
	s := m.cur.Load().series[i]
	m.totals[i].Add(bytes)
	s.ops.Add(1)
	s.bytes.Add(bytes)
	s.records.Add(records)
	us := max(lat.Microseconds(), histMinMicros)
	s.mu.Lock()
	_ = s.hist.RecordValue(min(us, histMaxMicros))
	s.mu.Unlock()
}

// swap ends the current phase and starts a new one, returning the ended
// phase's figures.
func (m *meter) swap() Run {
	next := m.newPhase()
	old := m.cur.Swap(next)
	r := old.result(m.names, next.start)
	if m.stats != nil {
		r.Requests = requestsPerGiB(next.stats.Sub(old.stats), r.bytes(), r.Seconds)
	}
	if m.server != nil {
		r.Server = requestsPerGiB(next.server.Sub(old.server), r.bytes(), r.Seconds)
	}
	return r
}

// peek returns the current phase's figures so far (for the progress line).
func (m *meter) peek() Run {
	return m.cur.Load().result(m.names, time.Now())
}

// bytes is what all series of r moved.
func (r Run) bytes() int64 {
	var n int64
	for _, m := range r.Metrics {
		n += m.Bytes
	}
	return n
}

// result turns a phase that ended at end into a Run (without request
// counts).
func (p *phase) result(names []string, end time.Time) Run {
	secs := end.Sub(p.start).Seconds()
	r := Run{Seconds: secs}
	for i, s := range p.series {
		s.mu.Lock()
		h := hdrhistogram.Import(s.hist.Export())
		s.mu.Unlock()
		ops, bytes, recs := s.ops.Load(), s.bytes.Load(), s.records.Load()
		r.Metrics = append(r.Metrics, Metric{
			Name:          names[i],
			Ops:           ops,
			Bytes:         bytes,
			Records:       recs,
			MBps:          float64(bytes) / secs / 1e6,
			OpsPerSec:     float64(ops) / secs,
			RecordsPerSec: float64(recs) / secs,
			Latency:       percentiles(h),
		})
	}
	return r
}

// percentiles reads the reported percentiles of h, in milliseconds.
func percentiles(h *hdrhistogram.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		P50:  ms(h.ValueAtQuantile(50)),
		P90:  ms(h.ValueAtQuantile(90)),
		P99:  ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)),
		Max:  ms(h.Max()),
	}
}

// requestsPerGiB scales request counts to one GiB of the bytes the
// workload moved (all its series together) and to one second.
func requestsPerGiB(d chunked.RequestStats, bytes int64, secs float64) *Requests {
	r := &Requests{Puts: d.Puts, Gets: d.Gets, Heads: d.Heads, Lists: d.Lists, Deletes: d.Deletes, Retries: d.Retries}
	if secs > 0 {
		r.PutsPerSec = float64(d.Puts) / secs
		r.GetsPerSec = float64(d.Gets) / secs
	}
	if bytes > 0 {
		gib := float64(bytes) / (1 << 30)
		r.PutsPerGiB = float64(d.Puts) / gib
		r.GetsPerGiB = float64(d.Gets) / gib
		r.TotalPerGiB = float64(d.Puts+d.Gets+d.Heads+d.Lists+d.Deletes) / gib
	}
	return r
}
