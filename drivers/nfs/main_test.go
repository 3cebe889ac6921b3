package nfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream/plugin"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	plugin.CleanupClients()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// driverBinary builds drivers/nfs/cmd/strata-driver-nfs once per test
// binary and returns its path.
func driverBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "strata-nfs-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "strata-driver-nfs")
		cmd := exec.Command("go", "build", "-o", binPath, "./drivers/nfs/cmd/strata-driver-nfs")
		cmd.Dir = testbed.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = err
			binPath = string(out)
		}
	})
	if binErr != nil {
		t.Fatalf("building strata-driver-nfs: %v\n%s", binErr, binPath)
	}
	return binPath
}
