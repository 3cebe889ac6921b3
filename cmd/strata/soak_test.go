package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stratastream/strata/stream/plugin"
)

func runSoakJSON(t *testing.T, args ...string) soakJSON {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"soak", "--json"}, args...), &stdout, &stderr)
	plugin.CleanupClients()
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
	if rep.Goroutines[0] == 0 || rep.Goroutines[1] > rep.Goroutines[0] || len(rep.ProcsLeft) > 0 || len(rep.Leaked) > 0 {
		t.Fatalf("leak check missing or failed: goroutines before/after %v, leaked %q, driver processes left %q", rep.Goroutines, rep.Leaked, rep.ProcsLeft)
	}
	if rep.Fenced == 0 {
		t.Fatalf("no open or append was fenced: the owners did not race: %+v", rep)
	}
	t.Logf("%s: %d operations, %d faults, %d acked, %d verified, %d fenced; goroutines before/after %v", strings.Join(args, " "), rep.Operations, rep.Faults, rep.Acked, rep.Verified, rep.Fenced, rep.Goroutines)
	return rep
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
