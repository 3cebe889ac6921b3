//go:build unix

package plugin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratastream/strata/stream"
)

// roleEnv makes the test binary act as a helper process instead of running
// tests: "host" (a host that starts a driver and then waits to be killed)
// or "bare-server" (the raw gRPC server of the transport benchmark).
const roleEnv = "STRATA_PLUGIN_TEST_ROLE"

var binDir string

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "host":
		runHelperHost()
		return
	case "bare-server":
		runBareServer()
		return
	}
	dir, err := os.MkdirTemp("", "strata-plugin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	CleanupClients()
	os.RemoveAll(dir)
	// No goroutine may outlive the tests (TestMain is taken, so this is
	// goleak.VerifyTestMain by hand).
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// binaries builds each test binary once per test process.
var (
	binMu    sync.Mutex
	binBuilt = map[string]string{}
)

// binary builds the main package pkg (relative to the module root) with
// extra go build flags and returns its path.
func binary(tb testing.TB, name, pkg string, flags ...string) string {
	tb.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := binBuilt[name]; ok {
		return p
	}
	out := filepath.Join(binDir, name)
	args := append([]string{"build", "-o", out}, flags...)
	args = append(args, "github.com/stratastream/strata/"+pkg)
	cmd := exec.Command("go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	binBuilt[name] = out
	return out
}

func memoryBinary(tb testing.TB) string {
	return binary(tb, "strata-driver-memory", "drivers/memory/cmd/strata-driver-memory")
}

func badBinary(tb testing.TB) string {
	return binary(tb, "baddriver", "stream/plugin/testdata/baddriver")
}

// testCtx is a context for one test that ends well before the test binary's
// own timeout, so a hang shows up as a failure naming the call.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startMemory starts the memory driver and returns the client.
func startMemory(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := Start(testCtx(t), memoryBinary(t), opts...)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// openMemory opens a store on the out-of-process memory driver.
func openMemory(t *testing.T, config string) *stream.Store {
	t.Helper()
	st, err := Open(testCtx(t), memoryBinary(t), []byte(config))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// runHelperHost is the "host" role: start the driver named by
// STRATA_PLUGIN_TEST_DRIVER, print its pid, and wait to be killed.
func runHelperHost() {
	c, err := Start(context.Background(), os.Getenv("STRATA_PLUGIN_TEST_DRIVER"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if _, err := c.OpenStore(context.Background(), nil); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("pid", c.Pid())
	select {}
}
