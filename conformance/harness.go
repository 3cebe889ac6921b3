package conformance

import (
	"context"
	"time"

	"github.com/stratastream/strata/stream"
)

// T is the part of *testing.T the cases use. *testing.T and *testing.B
// satisfy it, and so does the CLI's own runner (which runs cases outside
// `go test`). As with *testing.T, Fatalf and Skipf end the calling
// goroutine with runtime.Goexit, so they must be called from the goroutine
// running the case, never from goroutines the case starts.
type T interface {
	// Helper marks the caller as a helper function (for line numbers).
	Helper()
	// Name is the full case name.
	Name() string
	// Logf records a line of the case's log.
	Logf(format string, args ...any)
	// Errorf marks the case failed and logs; the case goes on.
	Errorf(format string, args ...any)
	// Fatalf marks the case failed, logs, and stops the case.
	Fatalf(format string, args ...any)
	// Skipf marks the case skipped, logs the reason, and stops the case.
	Skipf(format string, args ...any)
	// Failed reports whether the case has failed.
	Failed() bool
	// Cleanup registers f to run when the case ends (last registered, first
	// run).
	Cleanup(f func())
	// Context is cancelled just before the Cleanup functions run.
	Context() context.Context
	// TempDir returns a directory removed when the case ends.
	TempDir() string
}

// Harness is what a driver gives the suite: how to get stores on its
// backend, and what its crash and fault hooks are. NewStore is required;
// every other field is optional and the cases that need a missing one are
// skipped with a reason naming it.
//
// Every case uses stream names of its own under a prefix unique to the run
// (conformance/<run id>/<case>/...), so a namespace shared between cases or
// runs is fine, though a fresh one per case is best.
type Harness struct {
	// NewStore opens a Store on the driver's namespace for one case. The
	// suite closes it when the case ends (a crashed one too).
	// Required.
	NewStore func(t T) *stream.Store

	// Second opens another, independent Store on the same namespace as s:
	// another OS process where the driver allows it (its Info declares
	// SharedNamespace), else at least another Store value. Fencing and
	// read-only cases use it for their second writer or reader. Nil skips
	// those cases.
	Second func(t T, s *stream.Store) *stream.Store

	// Crash drops s without Close (in-process), or SIGKILLs the plugin
	// process s lives in, and returns a new Store on the same namespace.
	// Streams opened on s are abandoned, not closed; the suite closes s
	// only when the case is over (releasing what a real crash would have
	// ended with its process), never while it checks recovery. Nil skips
	// the durability cases.
	Crash func(t T, s *stream.Store) *stream.Store

	// CrashKillsProcess says that Crash kills the OS process holding the
	// driver's state. For a driver whose Info is not Durable that loses
	// acknowledged data by design, so the durability cases are then
	// skipped (a declared capability, not a failure).
	CrashKillsProcess bool

	// BackendCtl enables the fault family: the suite runs `BackendCtl stop`
	// (through sh -c, with the action appended as the last word) to take the
	// backend away mid-append and `BackendCtl start` to bring it back, e.g.
	// "./testbed/ctl minio". Empty skips the fault family.
	BackendCtl string

	// UnavailableWithin bounds how long an append or fetch may take to fail
	// with ErrUnavailable once the backend is stopped (fault family).
	// Zero means 60s.
	UnavailableWithin time.Duration

	// Seed seeds the randomised cases. Zero takes STRATA_SEED from the
	// environment, else a fresh seed. A failing randomised case logs the
	// seed; rerun with it to replay.
	Seed int64

	// Scale multiplies the sizes of the load-bearing cases (number of
	// in-flight appends, history length). Zero means 1; use less than 1
	// for a slow backend in a quick run.
	Scale float64
}

// unavailableWithin is h.UnavailableWithin with its default applied.
func (h Harness) unavailableWithin() time.Duration {
	if h.UnavailableWithin > 0 {
		return h.UnavailableWithin
	}
	return 60 * time.Second
}

// scaled returns n scaled by h.Scale, at least min(n, 4).
func (h Harness) scaled(n int) int {
	if h.Scale <= 0 || h.Scale == 1 {
		return n
	}
	m := int(float64(n) * h.Scale)
	if lo := min(n, 4); m < lo {
		m = lo
	}
	return m
}
