// Package testbed lets tests find the real backends that the scripts under
// testbed/ start. It never skips on its own: a backend that cannot be
// started fails the test run.
//
// The fast tier (`go test -short ./...`) runs with only Go installed, so a
// test that needs a testbed, an external tool (kcat, java, mvn) or minutes
// of time calls SkipShort first. Env refuses to start a backend under
// -short, so a test that forgets fails with a message saying so instead of
// installing and starting one.
package testbed

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var mu sync.Mutex

// Env returns the variables `testbed/up name` prints (KEY -> VALUE). If the
// variable want is already set in the environment (the full test command
// exports them), no script runs and only that variable is returned.
// Otherwise it runs testbed/up name, which installs (cached) and starts the
// backend, and returns an error with the script's output when it fails.
// Under -short it starts nothing and returns an error: the calling test
// should have called SkipShort.
func Env(name, want string) (map[string]string, error) {
	if v := os.Getenv(want); v != "" {
		return map[string]string{want: v}, nil
	}
	if short() {
		return nil, fmt.Errorf("testbed/up %s refused under -short: the fast tier starts no backend; the test must call testbed.SkipShort first", name)
	}
	mu.Lock()
	defer mu.Unlock()
	cmd := exec.Command(filepath.Join(RepoRoot(), "testbed", "up"), name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("testbed/up %s failed: %v\n%s", name, err, stderr.String())
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `'"`)
		env[k] = v
		os.Setenv(k, v)
	}
	if env[want] == "" {
		return nil, fmt.Errorf("testbed/up %s printed no %s:\n%s", name, want, out)
	}
	return env, nil
}

// RepoRoot is the root of the Strata checkout this package was built from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// SkipShort skips t under -short (the fast tier), saying what the test
// needs: a testbed ("the minio testbed"), a tool ("kcat") or time
// ("minutes of soak"). The full tier (scripts/test-all) runs without -short
// and so runs the test.
func SkipShort(t testing.TB, needs string) {
	t.Helper()
	if short() {
		t.Skipf("needs %s: skipped under -short; the full tier (./scripts/test-all) runs it", needs)
	}
}

// short reports whether this is a test binary run with -short (false
// before the test flags are parsed).
func short() bool {
	return testing.Testing() && flag.Parsed() && testing.Short()
}
