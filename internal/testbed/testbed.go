// Package testbed lets tests find the real backends that the scripts under
// testbed/ start. It never skips: a backend that cannot be started fails the
// test run.
package testbed

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

var mu sync.Mutex

// Env returns the variables `testbed/up name` prints (KEY -> VALUE). If the
// variable want is already set in the environment (the full test command
// exports them), no script runs and only that variable is returned.
// Otherwise it runs testbed/up name, which installs (cached) and starts the
// backend, and returns an error with the script's output when it fails.
func Env(name, want string) (map[string]string, error) {
	if v := os.Getenv(want); v != "" {
		return map[string]string{want: v}, nil
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
