package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
)

const driversUsage = `Usage: strata drivers [--json]

Lists the built-in drivers (memory, nfs, s3, azure, hdfs) and the plugin
binaries named strata-driver-* on $STRATA_PLUGIN_DIR. Each is launched
out-of-process and asked for its Info through a store opened with its
config: the file in $STRATA_<NAME>_CONFIG when set, an empty config for
memory and plugin binaries, a fresh temporary directory for nfs. A driver
that cannot open a store is still listed, with the error. Exit status: 0
listed, 2 bad input.

Flags:
`

// driverEntry is one row of `strata drivers`.
type driverEntry struct {
	Name    string       `json:"name"`
	Binary  string       `json:"binary"`
	Builtin bool         `json:"builtin"`
	Config  string       `json:"config,omitempty"`
	Info    *stream.Info `json:"info,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// runDrivers lists the built-in drivers and the plugin binaries named
// strata-driver-* on $STRATA_PLUGIN_DIR. Each is launched out-of-process
// and asked for its Info through a store opened with its config: the file in
// STRATA_<NAME>_CONFIG when set, an empty config for memory and plugin binaries, a fresh
// temporary directory for nfs. A driver that needs a config it was not given
// is still launched (proving it is a Strata plugin) and says so.
func runDrivers(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata drivers", driversUsage, stderr)
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata drivers: unexpected argument %q (flags only; see strata drivers -h)\n", fs.Arg(0))
		return 2
	}
	var entries []driverEntry
	for _, name := range builtinDrivers {
		e := driverEntry{Name: name, Builtin: true}
		drv, err := resolveDriver(name)
		if err != nil {
			e.Error = err.Error()
		} else {
			e.Binary = drv.String()
			describeDriver(ctx, &e, drv)
		}
		entries = append(entries, e)
	}
	if dir := os.Getenv("STRATA_PLUGIN_DIR"); dir != "" {
		for _, d := range filepath.SplitList(dir) {
			matches, _ := filepath.Glob(filepath.Join(d, "strata-driver-*"))
			for _, bin := range matches {
				e := driverEntry{Name: strings.TrimPrefix(filepath.Base(bin), "strata-driver-"), Binary: bin}
				describeDriver(ctx, &e, driverCommand{Path: bin})
				entries = append(entries, e)
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(entries); err != nil {
			fmt.Fprintln(stderr, "strata drivers:", err)
			return 1
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DRIVER\tKIND\tVERSION\tDURABLE\tSHARED\tREAD-ONLY\tMAX BATCH\tBINARY / NOTE")
	for _, e := range entries {
		kind := "plugin"
		if e.Builtin {
			kind = "builtin"
		}
		if e.Info == nil {
			note, _, _ := strings.Cut(strings.TrimSpace(e.Error), "\n")
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t%s\n", e.Name, kind, note)
			continue
		}
		i := e.Info
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\t%v\t%d\t%s\n", e.Name, kind, i.Version, i.Durable, i.SharedNamespace, i.ReadOnlyOpen, i.MaxBatchBytes, e.Binary)
	}
	tw.Flush()
	return 0
}

// describeDriver launches drv and fills in e.Info or e.Error.
func describeDriver(ctx context.Context, e *driverEntry, drv driverCommand) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	config, note, cleanup, err := driverConfig(e.Name)
	defer cleanup()
	if err != nil {
		e.Error = err.Error()
		return
	}
	e.Config = note
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := plugin.Start(ctx, drv.Path, append(drv.options(), plugin.WithLogger(quiet))...)
	if err != nil {
		e.Error = err.Error()
		return
	}
	defer c.Close()
	if config == nil {
		e.Error = fmt.Sprintf("plugin starts (pid %d); set STRATA_%s_CONFIG to a driver config file to show its Info", c.Pid(), strings.ToUpper(e.Name))
		return
	}
	s, err := c.OpenStore(ctx, config)
	if err != nil {
		e.Error = err.Error()
		return
	}
	defer s.Close()
	info := s.Info()
	e.Info = &info
}

// driverConfig returns the config `strata drivers` opens name with, a note
// saying where it came from (nil config when there is none), and a cleanup
// function to call when done.
func driverConfig(name string) (config []byte, note string, cleanup func(), err error) {
	cleanup = func() {}
	env := "STRATA_" + strings.ToUpper(name) + "_CONFIG"
	if p := os.Getenv(env); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, "", cleanup, fmt.Errorf("%s: %w", env, err)
		}
		return b, p, cleanup, nil
	}
	switch {
	case name == "memory" || !isBuiltin(name):
		return []byte{}, "empty config", cleanup, nil
	case name == "nfs":
		dir, err := os.MkdirTemp("", "strata-drivers-nfs-")
		if err != nil {
			return nil, "", cleanup, err
		}
		return fmt.Appendf(nil, "root: %q\n", dir), "temporary directory", func() { os.RemoveAll(dir) }, nil
	}
	return nil, "", cleanup, nil
}
