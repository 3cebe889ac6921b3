package drivertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream/plugin"
)

// built holds the plugin binaries built by this test binary, by driver.
var built struct {
	sync.Mutex
	dirs  []string
	bins  map[string]string
	fails map[string]error
}

// Main runs the tests of m, then stops any driver process a failed test
// left behind (plugin.CleanupClients), removes the plugin binaries
// PluginBinary built, and exits, failing a passing run that left
// goroutines behind (opts: goleak options, such as a known leak of a
// backend's client library). A driver's TestMain is
// `func TestMain(m *testing.M) { drivertest.Main(m) }`.
func Main(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	plugin.CleanupClients()
	built.Lock()
	for _, dir := range built.dirs {
		os.RemoveAll(dir)
	}
	built.Unlock()
	// No goroutine may outlive the tests (goleak.VerifyTestMain by hand).
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// PluginBinary builds the driver's plugin binary,
// drivers/DRIVER/cmd/strata-driver-DRIVER, once per test binary run and
// returns its path. A failed build fails t with the compiler's output.
func PluginBinary(t testing.TB, driver string) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if bin, ok := built.bins[driver]; ok {
		return bin
	}
	if err, ok := built.fails[driver]; ok {
		t.Fatal(err)
	}
	bin, err := build(driver)
	if err != nil {
		if built.fails == nil {
			built.fails = map[string]error{}
		}
		built.fails[driver] = err
		t.Fatal(err)
	}
	if built.bins == nil {
		built.bins = map[string]string{}
	}
	built.bins[driver] = bin
	return bin
}

// build runs go build for the driver's plugin binary into a new temporary
// directory (called with built locked).
func build(driver string) (string, error) {
	name := "strata-driver-" + driver
	dir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		return "", fmt.Errorf("go build %s: %w", name, err)
	}
	built.dirs = append(built.dirs, dir)
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "./drivers/"+driver+"/cmd/"+name)
	cmd.Dir = testbed.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", name, err, out)
	}
	return bin, nil
}
