package main

import (
	"log/slog"
	"path/filepath"
	"testing"
)

// TestWALFilesDefault: WAL files are on by default for the embedded
// default on a local directory, off when wal_files is false, and never
// without a directory to keep them in.
func TestWALFilesDefault(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	dir := filepath.Join(t.TempDir(), "wal")
	on, off := true, false
	for _, c := range []struct {
		name   string
		walDir string
		set    *bool
		want   bool
	}{
		{"local, unset", dir, nil, true},
		{"local, true", dir, &on, true},
		{"local, false", dir, &off, false},
		{"no directory (a configured driver)", "", nil, false},
	} {
		if got := walFiles(c.walDir, c.set, logger); got != c.want {
			t.Errorf("%s: walFiles = %v, want %v", c.name, got, c.want)
		}
	}
}
