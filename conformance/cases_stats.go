package conformance

import (
	"context"
	"errors"
)

var _ = register(FamilyContract,
	Case{Name: "backend-stats", Doc: "a store that counts its backend requests (stream.StatsReporter) counts the puts and bytes of acked appends, never goes backwards, and honours a done context", run: caseBackendStats},
)

func caseBackendStats(e *env) {
	s := e.store()
	r := s
	before, err := r.BackendStats(e.ctx)
	if errors.Is(err, errors.ErrUnsupported) {
		e.t.Skipf("driver %q does not count its backend requests: %v", s.Info().Driver, err)
	}
	if err != nil {
		e.t.Fatalf("BackendStats: %v", err)
	}
	st := e.open(s, e.name("s"), 1)
	const n, size = 8, 4096
	e.appendMany(st, "stats", n, size)
	after, err := r.BackendStats(e.ctx)
	if err != nil {
		e.t.Fatalf("BackendStats after %d appends: %v", n, err)
	}
	d := after.Sub(before)
	if d.Puts < 1 || d.BytesWritten < n*size {
		e.t.Fatalf("after %d acked appends of %d bytes the store counted %d puts and %d bytes written, want >= 1 and >= %d", n, size, d.Puts, d.BytesWritten, n*size)
	}
	for name, v := range map[string]int64{"puts": d.Puts, "gets": d.Gets, "heads": d.Heads, "lists": d.Lists, "deletes": d.Deletes, "bytes written": d.BytesWritten, "bytes read": d.BytesRead, "retries": d.Retries, "errors": d.Errors} {
		if v < 0 {
			e.t.Fatalf("the count of %s went backwards by %d", name, -v)
		}
	}
	done, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := r.BackendStats(done); !errors.Is(err, context.Canceled) {
		e.t.Fatalf("BackendStats with a cancelled context: %v, want an error matching context.Canceled", err)
	}
}
