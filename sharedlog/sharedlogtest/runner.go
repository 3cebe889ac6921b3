package sharedlogtest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/stratastream/strata/conformance"
)

// caseT is the conformance.T of RunCase. It mirrors the stream suite's own
// runner, which conformance does not export; see docs/sharedlog.md.
type caseT struct {
	name   string
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	failed   bool
	skipped  bool
	first    string
	log      []string
	cleanups []func()
	tempDirs []string
}

var _ conformance.T = (*caseT)(nil)

func newCaseT(parent context.Context, name string) *caseT {
	ctx, cancel := context.WithCancel(parent)
	return &caseT{name: name, ctx: ctx, cancel: cancel}
}

func (t *caseT) Helper()                  {}
func (t *caseT) Name() string             { return t.name }
func (t *caseT) Context() context.Context { return t.ctx }

func (t *caseT) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log = append(t.log, fmt.Sprintf(format, args...))
}

func (t *caseT) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	if t.first == "" {
		t.first = msg
	}
	t.log = append(t.log, msg)
}

func (t *caseT) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }

func (t *caseT) Fatalf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (t *caseT) Skipf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.skipped = true
	if !t.failed {
		t.first = msg
	}
	t.log = append(t.log, msg)
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *caseT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *caseT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *caseT) TempDir() string {
	dir, err := os.MkdirTemp("", "strata-sharedlogtest-")
	if err != nil {
		t.Fatalf("sharedlogtest: temp dir: %v", err)
	}
	t.mu.Lock()
	t.tempDirs = append(t.tempDirs, dir)
	t.mu.Unlock()
	return dir
}

// runCleanups cancels the context, then runs the cleanups last first.
func (t *caseT) runCleanups() {
	t.cancel()
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			dirs := t.tempDirs
			t.tempDirs = nil
			t.mu.Unlock()
			for _, d := range dirs {
				_ = os.RemoveAll(d)
			}
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				if r := recover(); r != nil {
					t.fail(fmt.Sprintf("panic in cleanup: %v", r))
				}
			}()
			f()
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.fail("a cleanup did not return within a minute")
		}
	}
}

func (t *caseT) outcome() (conformance.Status, string, []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	log := append([]string(nil), t.log...)
	first := t.first
	if i := strings.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	switch {
	case t.failed:
		return conformance.StatusFail, first, log
	case t.skipped:
		return conformance.StatusSkip, first, log
	}
	return conformance.StatusPass, "", log
}
