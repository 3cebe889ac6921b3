package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stratastream/strata/stream/plugin"
)

func runSoakJSON(t *testing.T, args ...string) soakJSON {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"soak", "--json"}, args...), &stdout, &stderr)
	leaked := driverChildren(t)
	plugin.CleanupClients()
	if len(leaked) > 0 {
		t.Errorf("driver processes left behind by the soak: %q", leaked)
	}
	var rep soakJSON
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, output is not JSON: %v\n%s\n%s", code, err, stdout.String(), stderr.String())
	}
	if code != 0 || !rep.OK {
		t.Fatalf("soak exit %d: %+v\n%s", code, rep, stderr.String())
	}
	if rep.Acked == 0 || rep.Verified != rep.Acked || rep.Lost+rep.Duplicated+rep.Diverged+rep.Violations+rep.Unexpected != 0 {
		t.Fatalf("soak report: %+v", rep)
	}
	if rep.Fenced == 0 {
		t.Fatalf("no open or append was fenced: the owners did not race: %+v", rep)
	}
	t.Logf("%s: %d operations, %d faults, %d acked, %d verified, %d fenced", strings.Join(args, " "), rep.Operations, rep.Faults, rep.Acked, rep.Verified, rep.Fenced)
	return rep
}

// driverChildren lists this process's child processes (zombies included)
// that are driver plugins.
func driverChildren(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var name, ppid, state string
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "Name":
				name = strings.TrimSpace(v)
			case "PPid":
				ppid = strings.TrimSpace(v)
			case "State":
				state = strings.TrimSpace(v)
			}
		}
		if ppid == me && strings.HasPrefix(name, "strata-driver") {
			out = append(out, fmt.Sprintf("%s pid %s (%s)", name, e.Name(), state))
		}
	}
	return out
}

// TestSoakShort runs short soaks: memory and nfs in-process, and nfs out of
// process with driver processes SIGKILLed mid-round and reopened.
func TestSoakShort(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		runSoakJSON(t, "--driver", "memory", "--rounds", "10", "--seed", "1")
	})
	t.Run("nfs", func(t *testing.T) {
		runSoakJSON(t, "--driver", "nfs", "--rounds", "6", "--seed", "2")
	})
	t.Run("nfs kill-driver", func(t *testing.T) {
		rep := runSoakJSON(t, "--driver", "nfs", "--kill-driver", "--rounds", "4", "--streams", "2", "--owners", "3", "--seed", "3")
		if !rep.OutOfProcess || rep.Faults == 0 {
			t.Fatalf("no driver was killed: %+v", rep)
		}
	})
}

// TestSoakBadInput: bad flags and a kill soak on a non-durable driver exit 2.
func TestSoakBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--driver", "memory", "--rounds", "0"},
		{"--driver", "/nonexistent/strata-driver-x"},
		{"--driver", "memory", "--kill-driver", "--rounds", "1"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"soak"}, args...), &stdout, &stderr); code != 2 {
			t.Errorf("strata soak %q: exit %d, want 2\n%s", args, code, stderr.String())
		}
	}
	plugin.CleanupClients()
}
