//go:build linux

package plugin

import (
	"errors"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// TestSupervisorRestartsDriver: a supervised driver killed with SIGKILL is
// down (calls fail with ErrUnavailable at once, its old streams stay
// failed) until it is restarted; then calls work again on a new process.
// Closed while it waits to restart, it starts nothing more.
func TestSupervisorRestartsDriver(t *testing.T) {
	ctx := testCtx(t)
	s, err := OpenSupervised(ctx, memoryBinary(t), nil, WithRestartDelay(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	store := stream.NewStore(s)
	defer store.Close()
	old, err := store.Open(ctx, "k", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	first := s.Client()
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.DriverUp() {
		if time.Now().After(deadline) {
			t.Fatal("DriverUp still true after the kill")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := store.Create(ctx, "x"); !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("Create while down: %v, want ErrUnavailable", err)
	}
	for !s.DriverUp() {
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatal("driver not restarted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.DriverRestarts(); n != 1 {
		t.Fatalf("DriverRestarts = %d, want 1", n)
	}
	if c := s.Client(); c == nil || c.Pid() == first.Pid() {
		t.Fatalf("restarted driver: %v (first pid %d)", c, first.Pid())
	}
	if _, err := stream.Append(ctx, old, stream.Batch{Count: 1, Payload: []byte("a")}); !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("append on a stream of the dead process: %v, want ErrUnavailable", err)
	}
	if err := store.Create(ctx, "x"); err != nil {
		t.Fatalf("Create after the restart: %v", err)
	}

	// Killed again and closed before the restart delay is over.
	second := s.Client()
	if err := second.Kill(); err != nil {
		t.Fatal(err)
	}
	for s.DriverUp() {
		time.Sleep(5 * time.Millisecond)
	}
	if err := store.Close(); err != nil {
		t.Fatalf("Close while down: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	if s.Client() != nil || s.DriverRestarts() != 1 {
		t.Fatalf("a closed Supervisor restarted its driver (restarts %d)", s.DriverRestarts())
	}
	if err := store.Create(ctx, "y"); !errors.Is(err, stream.ErrClosed) {
		t.Fatalf("Create after Close: %v, want ErrClosed", err)
	}
}
