package s3

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream"
)

// pluginBinary builds strata-driver-s3 once per test binary run.
var pluginBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "strata-driver-s3-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "strata-driver-s3")
	cmd := exec.Command("go", "build", "-o", bin, "./drivers/s3/cmd/strata-driver-s3")
	cmd.Dir = testbed.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
	}
	return bin, nil
})

// minioCtl is the fault family's command to stop and start MinIO.
func minioCtl() string {
	return filepath.Join(testbed.RepoRoot(), "testbed", "ctl") + " minio"
}

// unavailableWithin bounds the fault family's wait for ErrUnavailable: the
// testbed config's timeouts.operation plus the engine's retry of a failed
// put and slack for a loaded machine.
func unavailableWithin(cfg Config) time.Duration {
	return 2*cfg.withDefaults().Timeouts.Operation + 10*time.Second
}

// pluginHarness is the out-of-process harness on config: every store is a
// driver process of its own, a crash is SIGKILL.
func pluginHarness(t *testing.T, config []byte) conformance.Harness {
	t.Helper()
	bin, err := pluginBinary()
	if err != nil {
		t.Fatalf("go build strata-driver-s3: %v\n%s", err, err.(*exec.ExitError).Stderr)
	}
	h, info, err := conformance.PluginHarness(context.Background(), bin, config)
	if err != nil {
		t.Fatalf("PluginHarness: %v", err)
	}
	if info.Driver != DriverName || !info.Durable || !info.SharedNamespace {
		t.Fatalf("plugin Info %+v: want driver %q, durable, shared namespace", info, DriverName)
	}
	return h
}

// TestConformanceInProcess: the stream suite on the driver linked in; the
// second writer or reader of fencing and read-only cases is a driver
// process of its own; a crash drops the Store without Close; the fault
// family stops and restarts MinIO.
func TestConformanceInProcess(t *testing.T) {
	cfg := minioConfig(t)
	config := marshalConfig(t, cfg)
	out := pluginHarness(t, config)
	open := func(t conformance.T) stream.Store {
		s, err := Open(t.Context(), config)
		if err != nil {
			t.Fatalf("s3.Open: %v", err)
		}
		return s
	}
	conformance.Run(t, conformance.Harness{
		NewStore:          open,
		Second:            func(t conformance.T, _ stream.Store) stream.Store { return out.NewStore(t) },
		Crash:             func(t conformance.T, _ stream.Store) stream.Store { return open(t) },
		BackendCtl:        minioCtl(),
		UnavailableWithin: unavailableWithin(cfg),
	})
}

// TestConformanceOutOfProcess: the stream suite on the plugin binary; each
// store is its own driver process (so multi-writer cases race two
// processes), and a crash is SIGKILL.
func TestConformanceOutOfProcess(t *testing.T) {
	cfg := minioConfig(t)
	h := pluginHarness(t, marshalConfig(t, cfg))
	h.BackendCtl = minioCtl()
	h.UnavailableWithin = unavailableWithin(cfg)
	conformance.Run(t, h)
}
