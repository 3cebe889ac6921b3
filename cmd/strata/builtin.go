package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// builtinDrivers are the project's own drivers, by name.
var builtinDrivers = []string{"memory", "nfs", "s3", "azure", "hdfs"}

func isBuiltin(name string) bool {
	for _, b := range builtinDrivers {
		if b == name {
			return true
		}
	}
	return false
}

// resolveDriver turns a --driver argument into the path of a plugin binary.
// A path (anything with a '/') must name an executable file. A built-in
// name is built on demand from the Strata source tree (found from the working
// directory or $STRATA_SRC) into the cache, so it always matches the source;
// without a source tree it is looked up as strata-driver-NAME on
// $STRATA_PLUGIN_DIR and next to this executable.
func resolveDriver(ctx context.Context, nameOrPath string) (string, error) {
	if strings.ContainsRune(nameOrPath, '/') || !isBuiltin(nameOrPath) {
		p := nameOrPath
		if !strings.ContainsRune(p, '/') {
			if found, ok := findPluginBinary(p); ok {
				return found, nil
			}
			return "", fmt.Errorf("driver %q is neither a built-in (%s) nor a path to a plugin binary", p, strings.Join(builtinDrivers, ", "))
		}
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("driver binary %s: %w", p, err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("driver binary %s is not an executable file", p)
		}
		return filepath.Abs(p)
	}
	bin := "strata-driver-" + nameOrPath
	if src, ok := sourceRoot(); ok {
		out := filepath.Join(cacheDir(), "bin", bin)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./drivers/"+nameOrPath+"/cmd/"+bin)
		cmd.Dir = src
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("building built-in driver %s in %s: %v\n%s", nameOrPath, src, err, stderr.String())
		}
		return out, nil
	}
	if found, ok := findPluginBinary(bin); ok {
		return found, nil
	}
	return "", fmt.Errorf("built-in driver %s: no Strata source tree to build it from (run inside the checkout or set STRATA_SRC) and no %s on $STRATA_PLUGIN_DIR or next to %s", nameOrPath, bin, os.Args[0])
}

// findPluginBinary looks for an executable named name on $STRATA_PLUGIN_DIR
// and next to this executable.
func findPluginBinary(name string) (string, bool) {
	var dirs []string
	if d := os.Getenv("STRATA_PLUGIN_DIR"); d != "" {
		dirs = append(dirs, filepath.SplitList(d)...)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// sourceRoot finds the Strata module root: $STRATA_SRC, or the working
// directory or one of its parents.
func sourceRoot() (string, bool) {
	var starts []string
	if s := os.Getenv("STRATA_SRC"); s != "" {
		starts = append(starts, s)
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/stratastream/strata\n")) {
				return d, true
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", false
}

// cacheDir is where built plugin binaries go: $STRATA_CACHE or the user's
// cache directory.
func cacheDir() string {
	if d := os.Getenv("STRATA_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "strata")
	}
	return filepath.Join(os.TempDir(), "strata-cache")
}
