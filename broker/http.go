package broker

import (
	"fmt"
	"net/http"
)

// Handler serves the broker's operational endpoints:
//
//	/metrics   Prometheus text format
//	/healthz   200 while the process runs
//	/readyz    200 while the broker serves its partitions, 503 once fenced or closed
func (b *Broker) Handler() http.Handler {
	b.metrics.mu.Lock()
	b.metrics.ready = b.Ready
	b.metrics.epoch = b.Epoch
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
		switch {
		case b.closed.Load():
			http.Error(w, "closed", http.StatusServiceUnavailable)
		case b.fenced.Load():
			http.Error(w, "fenced by a newer broker of the cluster", http.StatusServiceUnavailable)
		default:
			fmt.Fprintf(w, "ready: cluster %s epoch %d\n", b.cfg.Cluster, b.epoch)
		}
	})
	return mux
}
