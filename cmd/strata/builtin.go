package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratastream/strata/stream/plugin"
)

// builtinDrivers are the project's own drivers, by name.
var builtinDrivers = []string{"memory", "nfs", "s3", "azure", "hdfs"}

func isBuiltin(name string) bool {
	_, ok := inProcessOpeners[name]
	return ok
}

// driverProcessCommand is the hidden subcommand under which this executable
// serves a built-in driver out of process: `strata driver-process NAME`.
const driverProcessCommand = "driver-process"

// driverCommand is how a driver process is started: a plugin binary, or
// this executable serving a built-in driver.
type driverCommand struct {
	// Path is the executable (a plugin binary or this strata executable).
	Path string
	// Args follow Path on the command line (the built-in's name); they
	// hold no config.
	Args []string
}

// options are the plugin options that start the command.
func (d driverCommand) options() []plugin.Option {
	if len(d.Args) == 0 {
		return nil
	}
	return []plugin.Option{plugin.WithArgs(d.Args...)}
}

// String is the command line, for reports and logs.
func (d driverCommand) String() string {
	return strings.Join(append([]string{d.Path}, d.Args...), " ")
}

// resolveDriver turns a --driver argument into a driver command. A path
// (anything with a '/') must name an executable file. A built-in name runs
// this executable as `strata driver-process NAME`: built-in drivers are
// the code installed with strata, never compiled at run time. Another name
// is looked up as an executable on $STRATA_PLUGIN_DIR and next to this
// executable.
func resolveDriver(nameOrPath string) (driverCommand, error) {
	if !strings.ContainsRune(nameOrPath, '/') {
		if isBuiltin(nameOrPath) {
			exe, err := os.Executable()
			if err != nil {
				return driverCommand{}, fmt.Errorf("built-in driver %s: locating the strata executable: %w", nameOrPath, err)
			}
			return driverCommand{Path: exe, Args: []string{driverProcessCommand, nameOrPath}}, nil
		}
		if found, ok := findPluginBinary(nameOrPath); ok {
			return driverCommand{Path: found}, nil
		}
		return driverCommand{}, fmt.Errorf("driver %q is neither a built-in (%s) nor a path to a plugin binary", nameOrPath, strings.Join(builtinDrivers, ", "))
	}
	st, err := os.Stat(nameOrPath)
	if err != nil {
		return driverCommand{}, fmt.Errorf("driver binary %s: %w", nameOrPath, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return driverCommand{}, fmt.Errorf("driver binary %s is not an executable file", nameOrPath)
	}
	p, err := filepath.Abs(nameOrPath)
	return driverCommand{Path: p}, err
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

// runDriverProcess implements the hidden `strata driver-process NAME`: it
// serves the built-in driver NAME to the host that started this process
// (plugin.Serve), and is what resolveDriver starts for a built-in.
func runDriverProcess(args []string, stderr io.Writer) int {
	if len(args) != 1 || !isBuiltin(args[0]) {
		fmt.Fprintf(stderr, "strata %s: want one built-in driver name (%s)\n", driverProcessCommand, strings.Join(builtinDrivers, ", "))
		return 2
	}
	plugin.Serve(inProcessOpeners[args[0]])
	return 0
}
