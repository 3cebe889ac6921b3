package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteTable writes one row per configuration and series: medians over
// the runs of throughput and latency percentiles, the spread of MB/s, and
// requests per GiB when counted.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "configuration\tseries\truns\tMB/s\tMB/s min-max\tops/s\trecords/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\treq/GiB\tPUT/GiB\t")
	for _, r := range results {
		for i, m := range r.Median {
			lo, hi := spread(r.Runs, i)
			req, put := requestCells(r)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f-%.1f\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\t\n",
				r.Config.Label, m.Name, len(r.Runs), m.MBps, lo, hi, m.OpsPerSec, m.RecordsPerSec,
				m.Latency.P50, m.Latency.P90, m.Latency.P99, m.Latency.P999, m.Latency.Max, req, put)
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

// WriteCharts writes throughput.png (median MB/s per configuration and
// series, a bar per run's spread) and latency.png (median latency
// percentiles per configuration and series, log scale) into dir.
func WriteCharts(dir string, results []Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type row struct {
		label string
		m     Metric
	}
	var rows []row
	for _, r := range results {
		for _, m := range r.Median {
			rows = append(rows, row{r.Config.Label + " · " + m.Name, m})
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("no results to chart")
	}
	height := vg.Length(len(rows))*0.3*vg.Inch + 1.5*vg.Inch

	// Throughput: horizontal bars, one per configuration and series.
	tp := plot.New()
	tp.Title.Text = "Throughput (median of runs)"
	tp.X.Label.Text = "MB/s"
	vals := make(plotter.Values, len(rows))
	names := make([]string, len(rows))
	for i, r := range rows {
		vals[len(rows)-1-i] = r.m.MBps
		names[len(rows)-1-i] = r.label
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(10))
	if err != nil {
		return err
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{R: 60, G: 110, B: 180, A: 255}
	bars.LineStyle.Width = 0
	tp.Add(bars)
	tp.NominalY(names...)
	tp.Add(plotter.NewGrid())
	if err := tp.Save(10*vg.Inch, height, filepath.Join(dir, "throughput.png")); err != nil {
		return fmt.Errorf("throughput chart: %w", err)
	}

	// Latency: one line per configuration and series across p50..max.
	lp := plot.New()
	lp.Title.Text = "Latency percentiles (median of runs)"
	lp.Y.Label.Text = "ms (log scale)"
	lp.Y.Scale = plot.LogScale{}
	lp.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lp.NominalX("p50", "p90", "p99", "p99.9", "max")
	lp.Legend.Top = true
	lp.Legend.Left = true
	top := 0.001
	for _, r := range rows {
		top = max(top, r.m.Latency.Max)
	}
	// Room above the lines for the legend (one row per line).
	lp.Y.Max = top * math.Pow(10, 0.3+0.12*float64(len(rows)))
	for i, r := range rows {
		l := r.m.Latency
		pts := make(plotter.XYs, 0, 5)
		for x, v := range []float64{l.P50, l.P90, l.P99, l.P999, l.Max} {
			pts = append(pts, plotter.XY{X: float64(x), Y: max(v, 0.001)})
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		line.Color, points.Color = c, c
		line.Dashes = plotutil.Dashes(i / 7)
		points.Shape = plotutil.Shape(i)
		lp.Add(line, points)
		lp.Legend.Add(r.label, line, points)
	}
	lp.Add(plotter.NewGrid())
	if err := lp.Save(10*vg.Inch, 4*vg.Inch+height, filepath.Join(dir, "latency.png")); err != nil {
		return fmt.Errorf("latency chart: %w", err)
	}
	return nil
}
