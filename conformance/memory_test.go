package conformance_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/conformance/internal/broken"
	"github.com/stratastream/strata/stream/plugin"
)

// TestMemoryInProcess runs the whole suite on the healthy memory driver
// in-process (Second and Crash open stores on the same namespace).
func TestMemoryInProcess(t *testing.T) {
	conformance.Run(t, broken.Harness(broken.None))
}

// TestMemoryOutOfProcess runs the whole suite on the memory driver's plugin
// binary through stream/plugin.
func TestMemoryOutOfProcess(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "strata-driver-memory")
	build := exec.Command("go", "build", "-o", bin, "github.com/stratastream/strata/drivers/memory/cmd/strata-driver-memory")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the memory plugin: %v\n%s", err, out)
	}
	t.Cleanup(plugin.CleanupClients)
	h, info, err := conformance.PluginHarness(context.Background(), bin, []byte("namespace: conformance\n"))
	if err != nil {
		t.Fatalf("plugin harness: %v", err)
	}
	if info.Driver != "memory" {
		t.Fatalf("plugin reports driver %q", info.Driver)
	}
	conformance.Run(t, h)
}
