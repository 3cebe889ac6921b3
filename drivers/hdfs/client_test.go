package hdfs

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"testing"

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
	st, err := NewStorage(t.Context(), cfg)
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
	st, err := NewStorage(t.Context(), cfg)
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
