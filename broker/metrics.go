package broker

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/stream"
)

// Metrics are the broker's Prometheus metrics, written in the text
// exposition format by WriteTo (served at /metrics by Handler).
type Metrics struct {
	bytesIn, bytesOut, badFrames, connections atomic.Int64

	mu       sync.Mutex
	requests map[[2]string]int64 // {api, error} -> count
	reqLat   map[string]*histogram
	appendL  map[string]*histogram // per driver
	fetchL   map[string]*histogram
	appendB  map[string]int64
	fetchB   map[string]int64

	// gauges read at exposition time
	ready func() bool
	epoch func() int32
	// backend reads the stores' backend request counts, by driver name.
	backend func(context.Context) map[string]stream.RequestStats
	// drivers reads the health of the drivers that report it.
	drivers func() []driverStatus
	// cluster reads the cluster counters (nil on a single broker).
	cluster func() ClusterStats
	// failed counts the partitions that failed to open.
	failed func() int
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		requests: map[[2]string]int64{},
		reqLat:   map[string]*histogram{},
		appendL:  map[string]*histogram{},
		fetchL:   map[string]*histogram{},
		appendB:  map[string]int64{},
		fetchB:   map[string]int64{},
	}
}

// latency buckets in seconds: 100us .. ~52s.
var buckets = func() []float64 {
	var b []float64
	for v := 0.0001; v < 60; v *= 2 {
		b = append(b, v)
	}
	return b
}()

type histogram struct {
	counts []int64 // per bucket (not cumulative), plus +Inf
	sum    float64
	n      int64
}

func (h *histogram) observe(d time.Duration) {
	if h.counts == nil {
		h.counts = make([]int64, len(buckets)+1)
	}
	s := d.Seconds()
	i := sort.SearchFloat64s(buckets, s)
	h.counts[i]++
	h.sum += s
	h.n++
}

func observe(m map[string]*histogram, key string, d time.Duration) {
	h := m[key]
	if h == nil {
		h = &histogram{}
		m[key] = h
	}
	h.observe(d)
}

func apiName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return "Unknown" + strconv.Itoa(int(key))
}

func (m *Metrics) request(key, code int16) {
	e := "NONE"
	if code != 0 {
		e = "UNKNOWN"
		if err := kerr.ErrorForCode(code); err != nil {
			if ke, ok := err.(*kerr.Error); ok {
				e = ke.Message
			}
		}
	}
	m.mu.Lock()
	m.requests[[2]string{apiName(key), e}]++
	m.mu.Unlock()
}

func (m *Metrics) latency(key int16, d time.Duration) {
	m.mu.Lock()
	observe(m.reqLat, apiName(key), d)
	m.mu.Unlock()
}

func (m *Metrics) produced(driver string, n int, d time.Duration) {
	m.mu.Lock()
	observe(m.appendL, driver, d)
	m.appendB[driver] += int64(n)
	m.mu.Unlock()
}

func (m *Metrics) fetched(driver string, n int, d time.Duration) {
	m.mu.Lock()
	observe(m.fetchL, driver, d)
	m.fetchB[driver] += int64(n)
	m.mu.Unlock()
}

// WriteTo writes the metrics in the Prometheus text format (version 0.0.4).
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	p := func(format string, a ...any) { fmt.Fprintf(cw, format, a...) }
	m.mu.Lock()
	backend := m.backend
	m.mu.Unlock()
	var stats map[string]stream.RequestStats
	if backend != nil {
		// A store in a driver process answers by RPC: bounded, outside m.mu.
		ctx, cancel := context.WithTimeout(context.Background(), backendStatsTimeout)
		stats = backend(ctx)
		cancel()
	}
	m.mu.Lock()
	defer m.mu.Unlock()

	p("# HELP strata_broker_requests_total Kafka requests handled, by API and error code.\n# TYPE strata_broker_requests_total counter\n")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		p("strata_broker_requests_total{api=%q,error=%q} %d\n", k[0], k[1], m.requests[k])
	}
	writeHist(p, "strata_broker_request_duration_seconds", "Time from reading a request to its response being ready, by API.", "api", m.reqLat)
	writeHist(p, "strata_broker_append_duration_seconds", "Produce latency until the batch is durable, by driver.", "driver", m.appendL)
	writeHist(p, "strata_broker_fetch_duration_seconds", "Partition read latency, by driver.", "driver", m.fetchL)
	p("# HELP strata_broker_append_bytes_total Record batch bytes appended, by driver.\n# TYPE strata_broker_append_bytes_total counter\n")
	for _, k := range sortedMapKeys(m.appendB) {
		p("strata_broker_append_bytes_total{driver=%q} %d\n", k, m.appendB[k])
	}
	p("# HELP strata_broker_fetch_bytes_total Record batch bytes fetched, by driver.\n# TYPE strata_broker_fetch_bytes_total counter\n")
	for _, k := range sortedMapKeys(m.fetchB) {
		p("strata_broker_fetch_bytes_total{driver=%q} %d\n", k, m.fetchB[k])
	}
	p("# HELP strata_broker_network_in_bytes_total Request bytes read.\n# TYPE strata_broker_network_in_bytes_total counter\nstrata_broker_network_in_bytes_total %d\n", m.bytesIn.Load())
	p("# HELP strata_broker_network_out_bytes_total Response bytes written.\n# TYPE strata_broker_network_out_bytes_total counter\nstrata_broker_network_out_bytes_total %d\n", m.bytesOut.Load())
	p("# HELP strata_broker_bad_frames_total Connections closed for an oversized or malformed request.\n# TYPE strata_broker_bad_frames_total counter\nstrata_broker_bad_frames_total %d\n", m.badFrames.Load())
	p("# HELP strata_broker_connections Open client connections.\n# TYPE strata_broker_connections gauge\nstrata_broker_connections %d\n", m.connections.Load())
	if m.ready != nil {
		r := 0
		if m.ready() {
			r = 1
		}
		p("# HELP strata_broker_ready 1 when the broker serves its partitions (not fenced, not closed, no driver down).\n# TYPE strata_broker_ready gauge\nstrata_broker_ready %d\n", r)
	}
	if m.failed != nil {
		p("# HELP strata_broker_partitions_failed Partitions this broker serves that failed to open: their calls get KAFKA_STORAGE_ERROR while they are reopened in the background.\n# TYPE strata_broker_partitions_failed gauge\nstrata_broker_partitions_failed %d\n", m.failed())
	}
	if m.epoch != nil {
		p("# HELP strata_broker_epoch The broker epoch (leader epoch of its partitions).\n# TYPE strata_broker_epoch gauge\nstrata_broker_epoch %d\n", m.epoch())
	}
	if m.drivers != nil {
		writeDrivers(p, m.drivers())
	}
	if m.cluster != nil {
		writeCluster(p, m.cluster())
	}
	writeBackend(p, stats)
	return cw.n, cw.err
}

// backendStatsTimeout bounds the reading of the stores' request counts at
// exposition time (a driver process that does not answer costs a scrape
// this long and leaves those series out).
const backendStatsTimeout = 2 * time.Second

// writeDrivers writes the health of the drivers that report it.
func writeDrivers(p func(string, ...any), ds []driverStatus) {
	if len(ds) == 0 {
		return
	}
	p("# HELP strata_driver_up 1 while the driver serves its store, 0 while its process is down (being restarted).\n# TYPE strata_driver_up gauge\n")
	for _, d := range ds {
		up := 0
		if d.up {
			up = 1
		}
		p("strata_driver_up{driver=%q} %d\n", d.name, up)
	}
	p("# HELP strata_driver_restarts_total Times the driver process was restarted after it died.\n# TYPE strata_driver_restarts_total counter\n")
	for _, d := range ds {
		p("strata_driver_restarts_total{driver=%q} %d\n", d.name, d.restarts)
	}
}

// writeBackend writes the stores' backend request counts (what a cloud
// bill is made of), by driver name.
func writeBackend(p func(string, ...any), stats map[string]stream.RequestStats) {
	if len(stats) == 0 {
		return
	}
	drivers := sortedMapKeys(stats)
	p("# HELP strata_backend_requests_total Requests the stores made to their backends, by driver and kind (put, get, head, list, delete).\n# TYPE strata_backend_requests_total counter\n")
	for _, d := range drivers {
		v := stats[d]
		for _, op := range []struct {
			name string
			n    int64
		}{{"put", v.Puts}, {"get", v.Gets}, {"head", v.Heads}, {"list", v.Lists}, {"delete", v.Deletes}} {
			p("strata_backend_requests_total{driver=%q,op=%q} %d\n", d, op.name, op.n)
		}
	}
	p("# HELP strata_backend_bytes_total Bytes the stores wrote to and read from their backends, by driver.\n# TYPE strata_backend_bytes_total counter\n")
	for _, d := range drivers {
		p("strata_backend_bytes_total{driver=%q,direction=\"written\"} %d\n", d, stats[d].BytesWritten)
		p("strata_backend_bytes_total{driver=%q,direction=\"read\"} %d\n", d, stats[d].BytesRead)
	}
	p("# HELP strata_backend_retries_total Backend requests retried, by driver.\n# TYPE strata_backend_retries_total counter\n")
	for _, d := range drivers {
		p("strata_backend_retries_total{driver=%q} %d\n", d, stats[d].Retries)
	}
	p("# HELP strata_backend_errors_total Backend requests that failed, by driver.\n# TYPE strata_backend_errors_total counter\n")
	for _, d := range drivers {
		p("strata_backend_errors_total{driver=%q} %d\n", d, stats[d].Errors)
	}
}

func writeHist(p func(string, ...any), name, help, label string, hs map[string]*histogram) {
	p("# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	for _, k := range sortedMapKeys(hs) {
		h := hs[k]
		var cum int64
		for i, le := range buckets {
			cum += h.counts[i]
			p("%s_bucket{%s=%q,le=%q} %d\n", name, label, k, strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		cum += h.counts[len(buckets)]
		p("%s_bucket{%s=%q,le=\"+Inf\"} %d\n", name, label, k, cum)
		p("%s_sum{%s=%q} %s\n", name, label, k, strconv.FormatFloat(h.sum, 'g', -1, 64))
		p("%s_count{%s=%q} %d\n", name, label, k, h.n)
	}
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
	return n, err
}
