//go:build linux

package plugin

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// processGone reports whether pid has exited: it no longer exists, or it is
// a zombie waiting for a parent (it has exited all the same).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// waitGone waits until pid has exited, failing the test at ctx's end.
func waitGone(ctx context.Context, t *testing.T, pid int, what string) {
	t.Helper()
	for !processGone(pid) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: driver process %d still running", what, pid)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDriverKilledMidAppend: SIGKILL the driver with appends in flight.
// Every pending append, and every later call, fails with ErrUnavailable
// naming the exit; nothing hangs.
func TestDriverKilledMidAppend(t *testing.T) {
	ctx := testCtx(t)
	c := startMemory(t)
	st, err := c.OpenStore(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Open(ctx, "k", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	futures := make(chan *stream.AppendFuture, 1<<16)
	stop := make(chan struct{})
	go func() {
		defer close(futures)
		p := payload(1, 64<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			futures <- s.Append(ctx, stream.Batch{Count: 1, Payload: p})
		}
	}()
	// Let a pipeline build up, then kill.
	var acked int
	for f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("append before the kill: %v", err)
		}
		if acked++; acked == 50 {
			break
		}
	}
	pid := c.Pid()
	if err := c.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	close(stop)
	failed := 0
	for f := range futures {
		_, err := f.Wait(ctx)
		if err == nil {
			continue // acked before the kill
		}
		failed++
		if !errors.Is(err, stream.ErrUnavailable) {
			t.Fatalf("pending append: %v, want ErrUnavailable", err)
		}
		if !strings.Contains(err.Error(), "killed") || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
			t.Fatalf("error %q does not name the exit (signal: killed) and pid %d", err, pid)
		}
	}
	if failed == 0 {
		t.Fatal("no append was pending when the driver died")
	}
	later := map[string]error{}
	_, later["append"] = s.Append(ctx, stream.Batch{Count: 1}).Wait(ctx)
	_, later["fetch"] = s.Fetch(ctx, 0, 1, 0)
	later["trim"] = s.Trim(ctx, 0)
	later["create"] = st.Create(ctx, "other")
	_, later["open"] = st.Open(ctx, "k", stream.OpenOptions{Epoch: 2})
	_, later["openstore"] = c.OpenStore(ctx, nil)
	for what, err := range later {
		if !errors.Is(err, stream.ErrUnavailable) || !strings.Contains(err.Error(), "killed") {
			t.Errorf("%s after the kill: %v, want ErrUnavailable naming the exit", what, err)
		}
	}
	// The host can start a new driver process and go on.
	c2 := startMemory(t)
	st2, err := c2.OpenStore(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st2.Create(ctx, "k"); err != nil {
		t.Fatalf("Create on the restarted driver: %v", err)
	}
}

// TestDriverExitsWithHost: a host process dies (SIGKILL); its driver
// process must exit on its own.
func TestDriverExitsWithHost(t *testing.T) {
	ctx := testCtx(t)
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), roleEnv+"=host", "STRATA_PLUGIN_TEST_DRIVER="+memoryBinary(t))
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper host: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "pid" {
		t.Fatalf("helper host said %q", line)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	if processGone(pid) {
		t.Fatalf("driver %d not running before the host dies", pid)
	}
	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	waitGone(ctx, t, pid, "host killed")
}

// TestCleanupClients: host shutdown stops every driver process.
func TestCleanupClients(t *testing.T) {
	ctx := testCtx(t)
	var clients []*Client
	for i := 0; i < 3; i++ {
		c, err := Start(ctx, memoryBinary(t))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	st, err := Open(ctx, memoryBinary(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Open(ctx, "x", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Append(ctx, s, stream.Batch{Count: 1}); err != nil {
		t.Fatal(err)
	}
	CleanupClients()
	for _, c := range clients {
		waitGone(ctx, t, c.Pid(), "CleanupClients")
		if _, err := c.OpenStore(ctx, nil); !errors.Is(err, stream.ErrClosed) {
			t.Fatalf("OpenStore after CleanupClients: %v, want ErrClosed", err)
		}
	}
	hs := st.Driver().(*hostStore)
	waitGone(ctx, t, hs.c.Pid(), "CleanupClients (plugin.Open)")
	if _, err := s.Append(ctx, stream.Batch{Count: 1}).Wait(ctx); err == nil {
		t.Fatal("append after CleanupClients succeeded")
	}
}

// TestCloseStopsDriver: Store.Close of plugin.Open stops the process.
func TestCloseStopsDriver(t *testing.T) {
	ctx := testCtx(t)
	st, err := Open(ctx, memoryBinary(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := st.Driver().(*hostStore).c.Pid()
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitGone(ctx, t, pid, "Store.Close")
}

// TestConfigNeverInArgvOrEnv: the driver's config travels only in the
// OpenStore call, so it is in neither the driver's command line nor its
// environment.
func TestConfigNeverInArgvOrEnv(t *testing.T) {
	ctx := testCtx(t)
	c := startMemory(t)
	const secret = "namespace-s3cr3t-4f9a"
	if _, err := c.OpenStore(ctx, []byte("namespace: "+secret)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(c.Pid()) + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Fatalf("driver's %s holds the config", f)
		}
		if f == "environ" && !strings.Contains(string(b), dataFDEnv+"=") {
			t.Fatalf("driver's environ lacks %s (is this the driver process?)", dataFDEnv)
		}
	}
}
