package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelp: -h, -help and --help on every subcommand (and strata help
// COMMAND) print that command's usage, with its flags, on stdout and exit
// 0; a bad flag names itself on stderr, with the usage, and exits 2.
func TestHelp(t *testing.T) {
	commands := []struct {
		args []string // the command, before the help flag
		flag string   // one of its flags, listed in the usage
	}{
		{[]string{"serve"}, "-listen"},
		{[]string{"drivers"}, "-json"},
		{[]string{"conformance"}, "-backend-ctl"},
		{[]string{"soak"}, "-kill-driver"},
		{[]string{"bench"}, "-workload"},
		{[]string{"bench", "report"}, "-chart-path"},
		{[]string{"sasl-credential"}, "-user"},
	}
	for _, c := range commands {
		name := strings.Join(c.args, " ")
		want := "Usage: strata " + c.args[0]
		for _, help := range [][]string{
			append(append([]string{}, c.args...), "-h"),
			append(append([]string{}, c.args...), "-help"),
			append(append([]string{}, c.args...), "--help"),
			append(append([]string{}, c.args...), "--no-such-flag=1", "--help"),
		} {
			wantCode := 0
			if help[len(help)-2] == "--no-such-flag=1" {
				wantCode = 2
			}
			t.Run(strings.Join(help, " "), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := run(t.Context(), help, &stdout, &stderr)
				if code != wantCode {
					t.Fatalf("strata %s exited %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(help, " "), code, wantCode, stdout.String(), stderr.String())
				}
				usage, other := stdout.String(), stderr.String()
				if wantCode != 0 {
					usage, other = other, usage
					if !strings.Contains(usage, "flag provided but not defined: -no-such-flag") {
						t.Errorf("stderr does not name the bad flag:\n%s", usage)
					}
				}
				listed := strings.Contains(usage, "\n  "+c.flag+" ") || strings.Contains(usage, "\n  "+c.flag+"\n")
				if !strings.Contains(usage, want) || !listed {
					t.Errorf("%s usage lacks %q or the flag %s:\n%s", name, want, c.flag, usage)
				}
				if other != "" {
					t.Errorf("the other stream is not empty:\n%s", other)
				}
			})
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"help", "bench"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), args, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
				t.Fatalf("strata %s exited %d, stderr:\n%s", strings.Join(args, " "), code, stderr.String())
			}
			want := "Usage:\n  strata serve"
			if len(args) > 1 {
				want = "Usage: strata bench"
			}
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
			}
		})
	}
}

// exitStatusChild makes the test binary the strata command in the child
// processes of TestExitStatus.
const exitStatusChild = "STRATA_TEST_AS_MAIN"

func init() {
	if os.Getenv(exitStatusChild) == "1" {
		main() // exits
	}
}

// TestExitStatus: the process exits with run's code (main's os.Exit; go
// run would turn every failure into 1). The child is this test binary
// running main.
func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"bench", "--help"}, 0},
		{[]string{"soak", "-h"}, 0},
		{[]string{"bench", "--no-such-flag"}, 2},
		{[]string{"frobnicate"}, 2},
		{nil, 2},
	} {
		cmd := exec.CommandContext(context.Background(), os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), exitStatusChild+"=1")
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("strata %s: %v", strings.Join(c.args, " "), err)
		}
		if code != c.want {
			t.Errorf("strata %s exited %d, want %d", strings.Join(c.args, " "), code, c.want)
		}
	}
}
