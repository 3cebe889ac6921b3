package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart files. Each comparison chart answers the question of one table of
// WriteMarkdown; LatencyChart shows the latency distributions per driver;
// ThroughputChart is an overview written only when a report holds no pair
// to compare (an ad-hoc `strata bench --out` run).
const (
	InVsOutChart    = "in-vs-out.png"
	VsRawChart      = "vs-raw.png"
	VsKafkaChart    = "vs-kafka.png"
	LatencyChart    = "latency.png"
	ThroughputChart = "throughput.png"
)

// chartFiles are every file WriteCharts may write; those a report does not
// produce are removed, so a directory never keeps a stale chart.
var chartFiles = []string{InVsOutChart, VsRawChart, VsKafkaChart, LatencyChart, ThroughputChart}

// Charts returns the chart files WriteCharts writes for results.
func Charts(results []Result) []string {
	var out []string
	if len(outVsIn(results)) > 0 {
		out = append(out, InVsOutChart)
	}
	if len(vsRaw(results)) > 0 {
		out = append(out, VsRawChart)
	}
	if len(kafkaResults(results)) > 0 && len(vsKafka(results)) > 0 {
		out = append(out, VsKafkaChart)
	}
	if len(out) == 0 {
		out = append(out, ThroughputChart)
	}
	return append(out, LatencyChart)
}

// WriteCharts writes the charts of results into dir (see Charts): every bar
// chart on a log scale with its value printed, so that a 4 GB/s bar and a
// 20 MB/s bar can both be read.
func WriteCharts(dir string, results []Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if countSeries(results) == 0 {
		return errors.New("no results to chart")
	}
	want := Charts(results)
	for _, f := range chartFiles {
		path := filepath.Join(dir, f)
		if !contains(want, f) {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		var err error
		switch f {
		case InVsOutChart:
			err = pairChart(path, "Out-of-process vs in-process append", outVsIn(results), "in-process", "out-of-process")
		case VsRawChart:
			err = pairChart(path, "Driver append vs the raw backend loop", vsRaw(results), "raw loop", "append")
		case VsKafkaChart:
			err = kafkaChart(path, kafkaResults(results))
		case ThroughputChart:
			err = overviewChart(path, results)
		case LatencyChart:
			err = latencyChart(path, results)
		}
		if err != nil {
			return fmt.Errorf("chart %s: %w", f, err)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func countSeries(results []Result) int {
	n := 0
	for _, r := range results {
		n += len(r.Median)
	}
	return n
}

// barSeries is one set of bars: a value per group (<= 0: none).
type barSeries struct {
	name string
	vals []float64
}

// palette colours the series of a bar chart.
var palette = []color.Color{
	color.RGBA{R: 60, G: 110, B: 180, A: 255},
	color.RGBA{R: 230, G: 130, B: 40, A: 255},
	color.RGBA{R: 80, G: 160, B: 90, A: 255},
	color.RGBA{R: 170, G: 70, B: 70, A: 255},
}

// barPlot is a horizontal grouped bar chart on a log X axis: one row per
// group (top to bottom in order), one bar per series in each row, each
// bar labelled with its value.
func barPlot(title, unit string, groups []string, ss []barSeries) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = unit + " (log scale)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	lo, hi := math.Inf(1), 0.0
	for _, s := range ss {
		for _, v := range s.vals {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	// Room left of the smallest bar and right of the largest for its label.
	p.X.Min, p.X.Max = lo/3, hi*6
	n := len(groups)
	rowH := vg.Points(10 * float64(len(ss)+1))
	w := rowH / vg.Length(len(ss)+1)
	for k, s := range ss {
		b := &hbars{vals: s.vals, color: palette[k%len(palette)], width: w,
			offset: (vg.Length(len(ss)-1)/2 - vg.Length(k)) * w, n: n}
		p.Add(b)
		if len(ss) > 1 {
			p.Legend.Add(s.name, b)
		}
	}
	names := make([]string, n)
	for i, g := range groups {
		names[n-1-i] = g
	}
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	if len(ss) > 1 {
		p.Y.Max += legendRows // an empty row on top for the legend
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p
}

// hbars draws one series of barPlot. Row i of the plot is group n-1-i.
type hbars struct {
	vals   []float64
	color  color.Color
	width  vg.Length
	offset vg.Length
	n      int
}

// Plot implements plot.Plotter.
func (b *hbars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := p.Y.Tick.Label
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	for i, v := range b.vals {
		if v <= 0 {
			continue
		}
		y := trY(float64(b.n-1-i)) + b.offset
		x0, x1 := c.Min.X, trX(v)
		c.FillPolygon(b.color, c.ClipPolygonXY([]vg.Point{
			{X: x0, Y: y - b.width/2}, {X: x1, Y: y - b.width/2},
			{X: x1, Y: y + b.width/2}, {X: x0, Y: y + b.width/2},
		}))
		c.FillText(sty, vg.Point{X: x1 + vg.Points(3), Y: y}, formatValue(v))
	}
}

// Thumbnail implements plot.Thumbnailer (the legend's swatch).
func (b *hbars) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.color, []vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y},
		{X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y},
	})
}

// formatValue prints a bar's value with about three significant digits.
func formatValue(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// savePanels saves plots side by side (cols per row) as one PNG.
func savePanels(path string, cols int, height vg.Length, plots ...*plot.Plot) error {
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
		for j := range grid[i] {
			if k := i*cols + j; k < len(plots) {
				grid[i][j] = plots[k]
			}
		}
	}
	width := vg.Length(cols) * 7 * vg.Inch
	img := vgimg.New(width, vg.Length(rows)*height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// legendRows is the room, in rows, that barPlot leaves above its groups
// for the legend when it has more than one series.
const legendRows = 1.2

// barHeight is the height of a bar panel with n groups of k bars each.
func barHeight(n, k int) vg.Length {
	rows := float64(n)
	if k > 1 {
		rows += legendRows
	}
	return vg.Length(rows*float64(k+1))*10*vg.Points(1) + 1.6*vg.Inch
}

// pairLabel names a compared pair by what the two results share: driver,
// batch, in flight and streams.
func pairLabel(c Config) string {
	return fmt.Sprintf("%s b=%s i=%d s=%d", c.Driver, SizeName(c.BatchBytes), c.Inflight, c.Streams)
}

// pairChart draws pairs of (baseline a, result b): MB/s on the left, p99
// latency on the right, a bar each.
func pairChart(path, title string, pairs []pair, aName, bName string) error {
	groups := make([]string, len(pairs))
	mbA, mbB := make([]float64, len(pairs)), make([]float64, len(pairs))
	p99A, p99B := make([]float64, len(pairs)), make([]float64, len(pairs))
	for i, p := range pairs {
		groups[i] = pairLabel(p.b.Config)
		a, b := p.a.Median[0], p.b.Median[0]
		mbA[i], mbB[i], p99A[i], p99B[i] = a.MBps, b.MBps, a.Latency.P99, b.Latency.P99
	}
	h := barHeight(len(pairs), 2)
	return savePanels(path, 2, h,
		barPlot(title+": throughput", "MB/s", groups, []barSeries{{aName, mbA}, {bName, mbB}}),
		barPlot(title+": p99 latency", "ms", groups, []barSeries{{aName, p99A}, {bName, p99B}}))
}

// kafkaResults are the produce-consume results, Apache Kafka's first.
func kafkaResults(results []Result) []Result {
	var kafka, other []Result
	for _, r := range results {
		if r.Config.Workload != WorkloadProduceConsume || len(r.Median) < 2 {
			continue
		}
		if strings.HasPrefix(r.Config.System, KafkaSystemPrefix) {
			kafka = append(kafka, r)
		} else {
			other = append(other, r)
		}
	}
	if len(kafka) == 0 {
		return nil
	}
	return append(kafka, other...)
}

// kafkaChart draws strata serve against Apache Kafka: produce MB/s on the
// left, produce p50 and p99 and end-to-end p99 on the right.
func kafkaChart(path string, rs []Result) error {
	groups := make([]string, len(rs))
	mb := make([]float64, len(rs))
	p50, p99, e2e := make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs))
	for i, r := range rs {
		groups[i] = r.Config.System
		mb[i] = r.Median[0].MBps
		p50[i], p99[i], e2e[i] = r.Median[0].Latency.P50, r.Median[0].Latency.P99, r.Median[1].Latency.P99
	}
	title := "strata serve vs Apache Kafka (" + strings.TrimPrefix(rs[0].Config.Label, rs[0].Config.System+" ") + ")"
	return savePanels(path, 2, barHeight(len(rs), 3),
		barPlot(title+": produce", "MB/s", groups, []barSeries{{"produce", mb}}),
		barPlot("latency", "ms", groups, []barSeries{{"produce p50", p50}, {"produce p99", p99}, {"end-to-end p99", e2e}}))
}

// overviewChart draws the median MB/s of every configuration and series.
func overviewChart(path string, results []Result) error {
	var groups []string
	var vals []float64
	for _, r := range results {
		for _, m := range r.Median {
			groups = append(groups, r.Config.Label+" · "+m.Name)
			vals = append(vals, m.MBps)
		}
	}
	return savePanels(path, 1, barHeight(len(groups), 1),
		barPlot("Throughput (median of runs)", "MB/s", groups, []barSeries{{"MB/s", vals}}))
}

// latencyPanel is the driver (or "Kafka protocol" for produce-consume) a
// result's latency distribution is drawn with.
func latencyPanel(c Config) string {
	if c.Workload == WorkloadProduceConsume || c.Driver == "" {
		return "Kafka protocol (produce-consume)"
	}
	return c.Driver + " driver"
}

// latencyChart draws, per driver, the latency percentiles (p50 to max) of
// every configuration and series on a log scale.
func latencyChart(path string, results []Result) error {
	type line struct {
		label string
		l     Latency
	}
	var order []string
	panels := map[string][]line{}
	for _, r := range results {
		key := latencyPanel(r.Config)
		if _, ok := panels[key]; !ok {
			order = append(order, key)
		}
		for _, m := range r.Median {
			panels[key] = append(panels[key], line{r.Config.Label + " · " + m.Name, m.Latency})
		}
	}
	var plots []*plot.Plot
	most := 0
	for _, key := range order {
		lines := panels[key]
		most = max(most, len(lines))
		p := plot.New()
		p.Title.Text = "Latency distribution: " + key
		p.Y.Label.Text = "ms (log scale)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.NominalX("p50", "p90", "p99", "p99.9", "max")
		p.Legend.Top, p.Legend.Left = true, true
		lo, top := math.Inf(1), 0.001
		for _, ln := range lines {
			top = max(top, ln.l.Max)
			lo = min(lo, max(ln.l.P50, 0.001))
		}
		p.Y.Min = lo / 2
		// Room above the lines for the legend (one row per line).
		p.Y.Max = top * math.Pow(10, 0.3+0.16*float64(len(lines)))
		for i, ln := range lines {
			pts := make(plotter.XYs, 0, 5)
			for x, v := range []float64{ln.l.P50, ln.l.P90, ln.l.P99, ln.l.P999, ln.l.Max} {
				pts = append(pts, plotter.XY{X: float64(x), Y: max(v, 0.001)})
			}
			l, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			c := plotutil.Color(i)
			l.Color, points.Color = c, c
			l.Dashes = plotutil.Dashes(i / 7)
			points.Shape = plotutil.Shape(i)
			p.Add(l, points)
			p.Legend.Add(ln.label, l, points)
		}
		p.Add(plotter.NewGrid())
		plots = append(plots, p)
	}
	cols := min(2, len(plots))
	return savePanels(path, cols, 3*vg.Inch+vg.Length(most)*0.17*vg.Inch, plots...)
}
