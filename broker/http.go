package broker

import (
	"context"
	"fmt"
	"net/http"

	"github.com/stratastream/strata/stream"
)

// Handler serves the broker's operational endpoints:
//
//	/metrics   Prometheus text format
//	/healthz   200 while the process runs
//	/readyz    200 while the broker serves its partitions; 503 once fenced or
//	           closed, and while a driver is down (DriverHealth). Partitions
//	           that failed to open (corrupt data: calls on them get
//	           KAFKA_STORAGE_ERROR) keep it 200 and are named in its body.
func (b *Broker) Handler() http.Handler {
	b.metrics.mu.Lock()
	b.metrics.ready = b.Ready
	b.metrics.epoch = b.Epoch
	b.metrics.backend = b.backendStats
	b.metrics.drivers = b.driverHealth
	if b.cl != nil {
		b.metrics.cluster = b.ClusterStats
	}
	b.metrics.failed = func() int { return len(b.failedPartitions()) }
	b.metrics.mu.Unlock()
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = b.metrics.WriteTo(w)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := b.notReady(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ready: cluster %s epoch %d\n", b.cfg.Cluster, b.epoch)
		if s := failedSummary(b.failedPartitions()); s != "" {
			fmt.Fprintln(w, s)
		}
	})
	return mux
}

// backendStats reads the request counts of the broker's stores that keep
// them (stream.StatsReporter), by driver name; a store that does not count
// or does not answer in time is left out.
func (b *Broker) backendStats(ctx context.Context) map[string]stream.RequestStats {
	out := map[string]stream.RequestStats{}
	for _, n := range b.namedStores() {
		v, err := n.store.BackendStats(ctx)
		if err != nil {
			continue
		}
		out[n.driver] = out[n.driver].Add(v)
	}
	return out
}
