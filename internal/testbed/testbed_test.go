package testbed

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv marks the child process of TestShortTier.
const childEnv = "STRATA_TESTBED_SHORT_CHILD"

// TestShortTier runs this test binary again with -test.short: there, Env
// refuses to start a backend (naming SkipShort) and SkipShort skips with
// the message the fast tier shows.
func TestShortTier(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		shortChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.short", "-test.v", "-test.run", "^TestShortTier$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "STRATA_TESTBED_SHORT_UNSET=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child under -short failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"env under -short: testbed/up no-such-testbed refused under -short",
		"needs the minio testbed: skipped under -short; the full tier (./scripts/test-all) runs it",
		"--- SKIP: TestShortTier",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}

// shortChild is TestShortTier in the child process.
func shortChild(t *testing.T) {
	if !testing.Short() {
		t.Fatal("child runs without -short")
	}
	// A name testbed/up does not know, so that even a broken Env starts
	// nothing.
	env, err := Env("no-such-testbed", "STRATA_TESTBED_SHORT_UNSET")
	if err == nil {
		t.Fatalf("Env under -short started a backend: %v", env)
	}
	t.Logf("env under -short: %v", err)
	SkipShort(t, "the minio testbed")
	t.Fatal("SkipShort did not skip under -short")
}
