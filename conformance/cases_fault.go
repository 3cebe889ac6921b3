package conformance

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"time"

	"github.com/stratastream/strata/stream"
)

var _ = register(FamilyFault,
	Case{Name: "stop-mid-append", Doc: "the backend stopped under a pipeline: appends fail ErrUnavailable within the bound; after a restart a higher-epoch open finds every acked batch", run: caseStopMidAppend},
	Case{Name: "stop-during-open", Doc: "Open while the backend is down fails ErrUnavailable within the bound, and works once it is back, data intact", run: caseStopDuringOpen},
)

// needBackendCtl skips the case unless the harness can stop the backend.
func (e *env) needBackendCtl() {
	e.t.Helper()
	if strings.TrimSpace(e.h.BackendCtl) == "" {
		e.t.Skipf("no BackendCtl (--backend-ctl): the fault family needs a command to stop and start the backend")
	}
}

// backend runs `BackendCtl action` and fails the case if it fails.
func (e *env) backend(action string) {
	e.t.Helper()
	if err := runBackendCtl(e.ctx, e.h.BackendCtl, action); err != nil {
		e.t.Fatalf("%v", err)
	}
	e.t.Logf("backend %s: done", action)
}

func runBackendCtl(ctx context.Context, ctl, action string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", ctl+" "+action)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return errors.New("backend control `" + ctl + " " + action + "` failed: " + err.Error() + ": " + strings.TrimSpace(out.String()))
	}
	return nil
}

// stopBackend stops the backend and makes sure it is started again when
// the case ends, whatever happens.
func (e *env) stopBackend() {
	e.t.Helper()
	restarted := false
	e.t.Cleanup(func() {
		if !restarted {
			_ = runBackendCtl(context.Background(), e.h.BackendCtl, "start")
		}
	})
	e.backend("stop")
	e.restart = func() {
		e.backend("start")
		restarted = true
	}
}

// retryOpen opens name at epoch, retrying ErrUnavailable until the bound.
func (e *env) retryOpen(s *stream.Store, name string, epoch uint64) *stream.Stream {
	e.t.Helper()
	deadline := time.Now().Add(e.h.unavailableWithin())
	for {
		st, err := s.Open(e.ctx, name, stream.OpenOptions{Epoch: epoch})
		if err == nil {
			e.closeStreamLater(st)
			return st
		}
		if !errors.Is(err, stream.ErrUnavailable) || time.Now().After(deadline) {
			e.t.Fatalf("open %q at epoch %d after the backend restarted: %v", name, epoch, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func caseStopMidAppend(e *env) {
	e.needBackendCtl()
	s := e.store()
	name := e.name("s")
	st := e.open(s, name, 1)
	all := e.appendMany(st, "fault-pre", 20, 500)
	// A writer keeps a pipeline of 16 going until an append fails.
	type res struct {
		acks []acked
		err  error
		at   time.Time
	}
	out := make(chan res, 1)
	go func() {
		var r res
		var futs []*stream.AppendFuture
		var bs []stream.Batch
		for i := 0; ; i++ {
			b := batch("fault", i, 200+i%3000)
			futs = append(futs, st.Append(e.ctx, b))
			bs = append(bs, b)
			if len(futs) < 16 {
				continue
			}
			a, err := futs[0].Wait(e.ctx)
			if err != nil {
				r.err, r.at = err, time.Now()
				for _, f := range futs[1:] { // the rest must fail too
					if _, err2 := f.Wait(e.ctx); err2 == nil {
						r.err = errors.New("an append after a failed one was acked (a gap)")
					}
				}
				out <- r
				return
			}
			r.acks = append(r.acks, acked{Base: a.BaseOffset, Batch: bs[0]})
			futs, bs = futs[1:], bs[1:]
		}
	}()
	time.Sleep(300 * time.Millisecond)
	began := time.Now()
	e.stopBackend()
	stopped := time.Now()
	var r res
	select {
	case r = <-out:
	case <-time.After(e.h.unavailableWithin() + 30*time.Second):
		e.t.Fatalf("appends still succeed or hang %v after the backend stopped", e.h.unavailableWithin()+30*time.Second)
	}
	if !errors.Is(r.err, stream.ErrUnavailable) {
		e.t.Fatalf("append with the backend stopped: %v, want ErrUnavailable", r.err)
	}
	if took := r.at.Sub(stopped); took > e.h.unavailableWithin() {
		e.t.Fatalf("append failed ErrUnavailable %v after the backend stopped, bound %v", took, e.h.unavailableWithin())
	}
	e.t.Logf("%d appends acked before the failure, %v after the stop command began (it took %v): %v", len(r.acks), r.at.Sub(began), stopped.Sub(began), r.err)
	all = append(all, r.acks...)
	e.restart()
	st2 := e.retryOpen(s, name, 2)
	log := e.readAll(st2)
	if err := contiguous(log); err != nil {
		e.t.Fatalf("log after the restart: %v", err)
	}
	e.checkHolds("log after the restart", log, all)
	a := e.appendOK(st2, batch("fault-post", 0, 100))
	if a.Base != endOfLog(log) {
		e.t.Fatalf("append after the restart at %d, want %d", a.Base, endOfLog(log))
	}
}

func caseStopDuringOpen(e *env) {
	e.needBackendCtl()
	s := e.store()
	name := e.name("s")
	st := e.open(s, name, 1)
	acks := e.appendMany(st, "fdo", 10, 300)
	e.stopBackend()
	start := time.Now()
	ctx, cancel := context.WithTimeout(e.ctx, e.h.unavailableWithin()+30*time.Second)
	_, err := s.Open(ctx, name, stream.OpenOptions{Epoch: 2})
	cancel()
	if !errors.Is(err, stream.ErrUnavailable) {
		e.t.Fatalf("open with the backend stopped: %v after %v, want ErrUnavailable", err, time.Since(start))
	}
	if took := time.Since(start); took > e.h.unavailableWithin() {
		e.t.Fatalf("open failed %v after the backend stopped, bound %v", took, e.h.unavailableWithin())
	}
	e.restart()
	st2 := e.retryOpen(s, name, 3)
	e.intact("after the restart", st2, acks)
}
