//go:build linux

package plugin

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// readPid waits for a pid written to file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", file)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStartTimeoutWithChildHoldingStdout: a wrapper that never hands
// over (it exits, or it waits) while a child it started keeps stdout
// open fails Start within its start timeout, and the child is killed.
func TestStartTimeoutWithChildHoldingStdout(t *testing.T) {
	for _, c := range []struct{ name, last string }{
		{"wrapper exits", "exit 3"},
		{"wrapper waits", "exec sleep 300"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "child.pid")
			bin := script(t, dir, "strata-driver-wrapper", "sleep 300 &\necho $! > '"+pidFile+"'\n"+c.last+"\n")
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				cl, err := Start(testCtx(t), bin, WithStartTimeout(2*time.Second), WithLogger(slog.New(slog.DiscardHandler)))
				if err == nil {
					cl.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Start of a wrapper that never hands over succeeded")
				}
				t.Logf("Start failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
			case <-time.After(30 * time.Second):
				t.Fatal("Start still running 30s after a 2s start timeout")
			}
			pid := readPid(t, pidFile)
			ctx := testCtx(t)
			waitGone(ctx, t, pid, "the wrapper's child after the failed start")
		})
	}
}

// TestDriverStdoutEscapedAndBounded: what a driver writes on stdout
// reaches the host only escaped and cut: a first line that is no
// handshake, in Start's error; later lines, in the host's log.
func TestDriverStdoutEscapedAndBounded(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("A", 100<<10)
	first := strings.Repeat("B", 20<<10) // fits go-plugin's 64 KiB line
	bad := script(t, dir, "strata-driver-noisy", "printf '\\033]0;pwned\\007"+first+"\\n'\nexit 1\n")
	_, err := Start(testCtx(t), bad, WithStartTimeout(20*time.Second), WithLogger(slog.New(slog.DiscardHandler)))
	if err == nil {
		t.Fatal("Start of a script that is no driver succeeded")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\x1b\x07") {
		t.Fatalf("Start's error holds raw control bytes: %q", msg[:min(len(msg), 200)])
	}
	if !strings.Contains(msg, `\x1b]0;pwned\x07`) {
		t.Fatalf("Start's error does not show the line escaped: %q", msg[:min(len(msg), 200)])
	}
	if len(msg) > 2*maxStdoutLine {
		t.Fatalf("Start's error is %d bytes for a %d-byte stdout line", len(msg), len(first))
	}

	// A wrapper whose child writes on stdout after the handshake.
	logFile, err := os.Create(filepath.Join(dir, "host.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	logs := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	wrapper := script(t, dir, "strata-driver-late", "(sleep 1; printf 'late\\033[2J"+long+"\\n') &\nexec '"+memoryBinary(t)+"'\n")
	c, err := Start(testCtx(t), wrapper, WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs(), "driver wrote to stdout") {
		if time.Now().After(deadline) {
			t.Fatalf("the late stdout line was not logged:\n%s", logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := logs()
	if strings.Contains(out, "\x1b") {
		t.Fatalf("the host log holds a raw escape byte")
	}
	if !strings.Contains(out, `late\x1b[2J`) || !strings.Contains(out, "cut_bytes=") {
		t.Fatalf("the late stdout line is not logged escaped and cut:\n%s", out[:min(len(out), 2000)])
	}
	if len(out) > 4*maxStdoutLine+8<<10 {
		t.Fatalf("host log is %d bytes after a %d-byte stdout line", len(out), len(long))
	}
}
