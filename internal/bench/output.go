package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes one row per configuration and series: medians over
// the runs of throughput and latency percentiles, the spread of MB/s, and
// requests per GiB when counted.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "configuration\tseries\truns\tMB/s\tMB/s min-max\tops/s\trecords/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\treq/GiB\tPUT/GiB\tputs/s\tgets/s\tserver puts/s\tserver gets/s\tdisk/records\t")
	for _, r := range results {
		for i, m := range r.Median {
			lo, hi := spread(r.Runs, i)
			req, put := requestCells(r)
			rate := func(q *Requests) (string, string) {
				if q == nil {
					return "-", "-"
				}
				return fmt.Sprintf("%.1f", q.PutsPerSec), fmt.Sprintf("%.1f", q.GetsPerSec)
			}
			puts, gets := rate(r.Requests)
			sputs, sgets := rate(r.Server)
			disk := "-"
			if r.Disk != nil {
				disk = fmt.Sprintf("%.2f", r.Disk.Ratio)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f-%.1f\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				r.Config.Label, m.Name, len(r.Runs), m.MBps, lo, hi, m.OpsPerSec, m.RecordsPerSec,
				m.Latency.P50, m.Latency.P90, m.Latency.P99, m.Latency.P999, m.Latency.Max, req, put, puts, gets, sputs, sgets, disk)
		}
	}
	return tw.Flush()
}

// requestCells are the requests and PUTs per GiB of r as table cells
// ("-" when not counted).
func requestCells(r Result) (req, put string) {
	if r.Requests == nil {
		return "-", "-"
	}
	return fmt.Sprintf("%.0f", r.Requests.TotalPerGiB), fmt.Sprintf("%.0f", r.Requests.PutsPerGiB)
}

// spread returns the lowest and highest MB/s of series i over runs.
func spread(runs []Run, i int) (lo, hi float64) {
	for j, r := range runs {
		v := r.Metrics[i].MBps
		if j == 0 || v < lo {
			lo = v
		}
		if j == 0 || v > hi {
			hi = v
		}
	}
	return lo, hi
}
