package hdfs

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream"
)

// TestNameNodeConnectionReset: when the NameNode connection of a client
// breaks (reset here under the client, as a network fault would), at most
// the call that finds it broken fails, with ErrUnavailable; the next call
// runs on a new connection. The client alone refuses every call for 5 s
// after a connection failure (its back-off per NameNode), so before the
// pool replaced broken clients the second call failed too
// ("no available namenodes"). cmd/strata's TestSoakNetworkFaults found it:
// after a network cut the driver stayed unavailable.
func TestNameNodeConnectionReset(t *testing.T) {
	cfg := freshConfig(t)
	cfg.Connections = 1
	st, err := OpenStorage(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data := []byte("survives a reset")
	if err := st.PutIfAbsent(t.Context(), "k0", data); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		m := st.pool.members[0].cur.Load()
		dc := m.conn.Load()
		if dc == nil {
			t.Fatal("the client has no NameNode connection")
		}
		if tc, ok := dc.Conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not an orderly close
		}
		_ = dc.Conn.Close()

		// The first call finds the connection dead; it may fail.
		if _, err := st.Stat(t.Context(), "k0"); err != nil && !errors.Is(err, stream.ErrUnavailable) {
			t.Fatalf("reset %d: first Stat: %v, want nil or ErrUnavailable", i, err)
		} else if err != nil {
			t.Logf("reset %d: first call: %v", i, err)
		}
		// The next ones must not.
		if n, err := st.Stat(t.Context(), "k0"); err != nil || n != int64(len(data)) {
			t.Fatalf("reset %d: Stat after the failed call = %d, %v; want %d, nil", i, n, err, len(data))
		}
		key := fmt.Sprintf("k%d", i)
		if err := st.PutIfAbsent(t.Context(), key, data); err != nil {
			t.Fatalf("reset %d: PutIfAbsent %s: %v", i, key, err)
		}
		if got, err := st.Get(t.Context(), key, 0, -1); err != nil || string(got) != string(data) {
			t.Fatalf("reset %d: Get %s = %q, %v", i, key, got, err)
		}
		if cur := st.pool.members[0].cur.Load(); cur == m {
			t.Fatalf("reset %d: the broken client was not replaced", i)
		}
	}
}

// TestNameNodeRestartWhileIdle: the NameNode restarts (testbed/ctl hdfs
// stop, start) while a Storage is idle. Every client of its pool finds its
// connection dead (renewing its leases, once a second) and then refuses
// calls for 5 s, dialing again only after that; the calls right after the
// restart must succeed all the same (the pool replaces those clients).
// Before, they failed with "no available namenodes: ... connection
// refused" until the back-off ran out.
func TestNameNodeRestartWhileIdle(t *testing.T) {
	cfg := freshConfig(t)
	st, err := OpenStorage(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data := []byte("survives a NameNode restart")
	if err := st.PutIfAbsent(t.Context(), "k", data); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"stop", "start"} {
		cmd := exec.Command("sh", "-c", drivertest.BackendCtl("hdfs", action))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("testbed/ctl hdfs %s: %v\n%s", action, err, out)
		}
	}
	for i := range 2 * cfg.Connections {
		if n, err := st.Stat(t.Context(), "k"); err != nil || n != int64(len(data)) {
			t.Fatalf("Stat %d after the restart = %d, %v; want %d, nil", i, n, err, len(data))
		}
	}
	if err := st.PutIfAbsent(t.Context(), "k2", data); err != nil {
		t.Fatalf("PutIfAbsent after the restart: %v", err)
	}
}

// TestPeerGone: the check the pool runs before handing out a client sees a
// connection its peer reset or closed, and not one that is idle or has an
// answer waiting (which it must not consume). Without it, calls right
// after a network cut failed on connections the cut had reset while idle
// (TestSoakNetworkFaults/hdfs: unexpected errors in the round after a cut).
func TestPeerGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (client, server net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		return c, s
	}
	// eventually: the peer's close or bytes reach the client's socket.
	eventually := func(c net.Conn, want bool) bool {
		for range 100 {
			if peerGone(c) == want {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}

	idle, _ := pair()
	if peerGone(idle) {
		t.Error("idle connection reported gone")
	}

	waiting, s := pair()
	if _, err := s.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if peerGone(waiting) {
		t.Error("connection with an answer waiting reported gone")
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(waiting, buf); err != nil || string(buf) != "answer" {
		t.Errorf("read after the check = %q, %v; the check consumed the answer", buf, err)
	}

	reset, s := pair()
	s.(*net.TCPConn).SetLinger(0)
	s.Close()
	if !eventually(reset, true) {
		t.Error("connection reset by its peer not reported gone")
	}

	closed, s := pair()
	s.Close()
	if !eventually(closed, true) {
		t.Error("connection closed by its peer not reported gone")
	}

	mine, _ := pair()
	mine.Close()
	if !peerGone(mine) {
		t.Error("connection closed on this side not reported gone")
	}
}
