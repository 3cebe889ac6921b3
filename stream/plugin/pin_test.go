//go:build unix

package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestPinnedBinarySwapNeverRuns: the file of a pinned driver is replaced
// by another program after its bytes were hashed and before they run. The
// hashed bytes run (a Strata driver answers), the program swapped in never
// does.
func TestPinnedBinarySwapNeverRuns(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(memoryBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(good)
	path := filepath.Join(dir, "strata-driver-pinned")
	if err := os.WriteFile(path, good, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "swapped-in-program-ran")
	evil := filepath.Join(dir, "evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\necho ran > '"+marker+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	swaps := 0
	testHookHashed = func(string) {
		swaps++
		if err := os.Rename(evil, path); err != nil {
			t.Errorf("swap: %v", err)
		}
	}
	t.Cleanup(func() { testHookHashed = nil })

	c, startErr := Start(testCtx(t), path, WithSHA256(hex.EncodeToString(sum[:])))
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the program swapped in after the checksum ran (Start: %v)", startErr)
	}
	if swaps != 1 {
		t.Fatalf("the swap hook ran %d times, want 1", swaps)
	}
	if startErr != nil {
		t.Fatalf("Start of the pinned bytes: %v", startErr)
	}
	defer c.Close()
	st, err := c.OpenStore(testCtx(t), nil)
	if err != nil {
		t.Fatalf("OpenStore on the pinned driver: %v", err)
	}
	if d := st.Info().Driver; d != "memory" {
		t.Fatalf("pinned driver reports %q, want memory", d)
	}
	_ = st.Close()
}
