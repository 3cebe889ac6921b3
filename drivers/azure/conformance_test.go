package azure

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
)

// pluginDir holds the plugin binary built for this test run; TestMain
// removes it.
var pluginDir string

// pluginBinary builds strata-driver-azure once per test binary run.
var pluginBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "strata-driver-azure-")
	if err != nil {
		return "", err
	}
	pluginDir = dir
	bin := filepath.Join(dir, "strata-driver-azure")
	cmd := exec.Command("go", "build", "-o", bin, "./drivers/azure/cmd/strata-driver-azure")
	cmd.Dir = testbed.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: string(out)}
	}
	return bin, nil
})

// TestMain stops any driver process a failed test left and removes the
// plugin binary.
func TestMain(m *testing.M) {
	code := m.Run()
	plugin.CleanupClients()
	if pluginDir != "" {
		os.RemoveAll(pluginDir)
	}
	os.Exit(code)
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string {
	return "go build strata-driver-azure: " + e.err.Error() + "\n" + e.out
}

// harness opens the stores of one conformance run on Azurite. Stores of the
// run share one fresh prefix (cases use names of their own under it).
// Second always starts another driver process, so two-writer cases race
// across OS processes in both modes.
type harness struct {
	config []byte
	mu     sync.Mutex
	procs  map[stream.Store]*plugin.Client
}

func newHarness(t *testing.T) *harness {
	if _, err := pluginBinary(); err != nil {
		t.Fatal(err)
	}
	return &harness{config: marshal(t, freshConfig(t)), procs: map[stream.Store]*plugin.Client{}}
}

// inProcess opens a Store in this process.
func (h *harness) inProcess(t conformance.T) stream.Store {
	t.Helper()
	s, err := Open(t.Context(), h.config)
	if err != nil {
		t.Fatalf("azure.Open: %v", err)
	}
	return s
}

// outOfProcess starts a driver process and opens a Store in it. The process
// is stopped when the case ends.
func (h *harness) outOfProcess(t conformance.T) stream.Store {
	t.Helper()
	bin, err := pluginBinary()
	if err != nil {
		t.Fatalf("%v", err)
	}
	ctx := context.Background()
	c, err := plugin.Start(ctx, bin, plugin.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("plugin.Start(%s): %v", bin, err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.OpenStore(ctx, h.config)
	if err != nil {
		t.Fatalf("OpenStore in driver process %d: %v", c.Pid(), err)
	}
	h.mu.Lock()
	h.procs[s] = c
	h.mu.Unlock()
	return s
}

// crashOutOfProcess SIGKILLs the driver process holding s and opens a
// Store in a new process.
func (h *harness) crashOutOfProcess(t conformance.T, s stream.Store) stream.Store {
	t.Helper()
	h.mu.Lock()
	c, ok := h.procs[s]
	delete(h.procs, s)
	h.mu.Unlock()
	if !ok {
		t.Fatalf("azure harness: store %p has no driver process", s)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("killing driver process %d: %v", c.Pid(), err)
	}
	return h.outOfProcess(t)
}

// backendCtl is the fault family's command to stop and start Azurite.
func backendCtl() string {
	return filepath.Join(testbed.RepoRoot(), "testbed", "ctl") + " azurite"
}

// TestConformanceInProcess: the stream suite on the driver linked in; the
// second writer of fencing cases is another OS process; a crash drops the
// Store without Close.
func TestConformanceInProcess(t *testing.T) {
	h := newHarness(t)
	conformance.Run(t, conformance.Harness{
		NewStore:   h.inProcess,
		Second:     func(t conformance.T, _ stream.Store) stream.Store { return h.outOfProcess(t) },
		Crash:      func(t conformance.T, _ stream.Store) stream.Store { return h.inProcess(t) },
		BackendCtl: backendCtl(),
	})
}

// TestConformanceOutOfProcess: the stream suite on the plugin binary; each
// store is its own driver process, and a crash is SIGKILL.
func TestConformanceOutOfProcess(t *testing.T) {
	h := newHarness(t)
	conformance.Run(t, conformance.Harness{
		NewStore:          h.outOfProcess,
		Second:            func(t conformance.T, _ stream.Store) stream.Store { return h.outOfProcess(t) },
		Crash:             h.crashOutOfProcess,
		CrashKillsProcess: true,
		BackendCtl:        backendCtl(),
	})
}
