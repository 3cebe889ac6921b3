package soak

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Leaks is what a run left running once it was over: goroutines beyond
// the count before it, and child processes (driver plugins) of this
// process.
type Leaks struct {
	// GoroutinesBefore and GoroutinesAfter are runtime.NumGoroutine()
	// before the run and after it settled (or the wait ran out).
	GoroutinesBefore, GoroutinesAfter int
	// Goroutines are the goroutines started since the baseline and still
	// running when GoroutinesAfter > GoroutinesBefore, each as its top
	// frames and creator, with a count ("3 x a.f < b.g, created by c.h").
	Goroutines []string
	// Processes are this process's child processes still present (zombies
	// included), each as "name pid N (state)".
	Processes []string
}

// Found reports whether goroutines or processes were left behind.
func (l *Leaks) Found() bool {
	return l.GoroutinesAfter > l.GoroutinesBefore || len(l.Processes) > 0
}

// Problems describes the leaks in words, one line each.
func (l *Leaks) Problems() []string {
	var out []string
	if l.GoroutinesAfter > l.GoroutinesBefore {
		out = append(out, fmt.Sprintf("goroutine leak: %d goroutines before the run, %d after it settled; started during the run and still running: %s",
			l.GoroutinesBefore, l.GoroutinesAfter, strings.Join(l.Goroutines, "; ")))
	}
	if len(l.Processes) > 0 {
		out = append(out, fmt.Sprintf("process leak: child processes left after the run: %s", strings.Join(l.Processes, ", ")))
	}
	return out
}

// Baseline is the goroutines running before a run, to compare with after.
type Baseline struct {
	n   int
	ids map[string]bool
}

// TakeBaseline records the goroutines running now.
func TakeBaseline() Baseline {
	b := Baseline{n: runtime.NumGoroutine(), ids: map[string]bool{}}
	for _, g := range goroutines() {
		b.ids[g.id] = true
	}
	return b
}

// Check waits up to wait for the goroutine count to fall back to the
// baseline's and for every child process to be gone, then reports what is
// left. It is meaningful only when nothing else in the process starts
// goroutines or children meanwhile (not alongside parallel tests).
func (b Baseline) Check(ctx context.Context, wait time.Duration) Leaks {
	deadline := time.Now().Add(wait)
	var l Leaks
	for {
		l = Leaks{GoroutinesBefore: b.n, GoroutinesAfter: runtime.NumGoroutine()}
		procs, err := ChildProcesses()
		if err != nil {
			procs = []string{err.Error()}
		}
		l.Processes = procs
		if !l.Found() || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if l.GoroutinesAfter > l.GoroutinesBefore {
		counts := map[string]int{}
		for _, g := range goroutines() {
			if !b.ids[g.id] {
				counts[g.summary]++
			}
		}
		for s, n := range counts {
			l.Goroutines = append(l.Goroutines, fmt.Sprintf("%d x %s", n, s))
		}
		sort.Strings(l.Goroutines)
	}
	return l
}

// goroutine is one goroutine of the runtime/pprof goroutine profile.
type goroutine struct {
	id      string
	summary string // top frames and creator
}

// topFrames is how many frames of a leaked goroutine's stack are shown.
const topFrames = 3

// goroutines lists the running goroutines from the goroutine profile in
// its debug=2 form (runtime.Stack's format, with goroutine ids).
func goroutines() []goroutine {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		return nil
	}
	var out []goroutine
	for _, block := range strings.Split(buf.String(), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		head, ok := strings.CutPrefix(lines[0], "goroutine ")
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(head, " ")
		var frames []string
		creator := ""
		for _, line := range lines[1:] {
			if strings.HasPrefix(line, "\t") {
				continue // file:line of the frame above
			}
			if c, ok := strings.CutPrefix(line, "created by "); ok {
				creator, _, _ = strings.Cut(c, " in goroutine")
				break
			}
			if len(frames) < topFrames {
				fn := line
				if i := strings.LastIndex(fn, "("); i > 0 {
					fn = fn[:i]
				}
				frames = append(frames, fn)
			}
		}
		s := strings.Join(frames, " < ")
		if creator != "" {
			s += ", created by " + creator
		}
		out = append(out, goroutine{id: id, summary: s})
	}
	return out
}

// ChildProcesses lists this process's child processes (zombies included),
// each as "name pid N (state)", from /proc.
func ChildProcesses() ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("cannot list child processes: %w", err)
	}
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue // gone meanwhile
		}
		var name, ppid, state string
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "Name":
				name = strings.TrimSpace(v)
			case "PPid":
				ppid = strings.TrimSpace(v)
			case "State":
				state = strings.TrimSpace(v)
			}
		}
		if ppid == me {
			out = append(out, fmt.Sprintf("%s pid %s (%s)", name, e.Name(), state))
		}
	}
	return out, nil
}
