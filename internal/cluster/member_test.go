package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/internal/testbed"
)

var prefixSeq atomic.Int64

// etcdEndpoints returns the endpoints of the shared etcd testbed.
func etcdEndpoints(t *testing.T) []string {
	t.Helper()
	testbed.SkipShort(t, "the etcd testbed")
	env, err := testbed.Env("etcd", "STRATA_ETCD_ENDPOINTS")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(env["STRATA_ETCD_ENDPOINTS"], ",")
}

// newPrefix is an etcd prefix of the test's own.
func newPrefix(t *testing.T) string {
	return fmt.Sprintf("/strata-test/%s/%d-%d/", t.Name(), os.Getpid(), prefixSeq.Add(1))
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func join(t *testing.T, eps []string, prefix, name string) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := Join(ctx, Config{Endpoints: eps, Prefix: prefix, Cluster: "c", Storage: "nfs:/x", Name: name,
		Addr: name + ":9092", TTL: 2 * time.Second, Logger: testLogger(t).With("member", name)})
	if err != nil {
		t.Fatalf("Join %s: %v", name, err)
	}
	return m
}

// waitView waits until ok holds for m's view.
func waitView(t *testing.T, m *Member, within time.Duration, what string, ok func(View) bool) View {
	t.Helper()
	deadline := time.After(within)
	for {
		ch := m.Changed()
		v := m.View()
		if ok(v) {
			return v
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("node %d: %s not seen within %s; view %+v", m.ID(), what, within, v)
		}
	}
}

// settled reports whether every unit is owned by one of nodes, balanced.
func settled(us []string, nodes ...int32) func(View) bool {
	return func(v View) bool {
		if len(v.Nodes) != len(nodes) {
			return false
		}
		load := map[int32]int{}
		for _, u := range us {
			o, ok := v.Owners[u]
			if !ok {
				return false
			}
			if _, live := v.Nodes[o.Node]; !live {
				return false
			}
			load[o.Node]++
		}
		if len(v.Owners) != len(us) {
			return false
		}
		for _, n := range nodes {
			if l := load[n]; l < len(us)/len(nodes) || l > (len(us)+len(nodes)-1)/len(nodes) {
				return false
			}
		}
		return true
	}
}

func controllers(ms ...*Member) int {
	n := 0
	for _, m := range ms {
		if m != nil && m.Stats().Controller {
			n++
		}
	}
	return n
}

// TestMembersShareUnits runs three members on the etcd testbed: the units
// are spread evenly with one controller; a member killed without revoking
// its lease has its units moved to the others after the TTL, each at a
// higher epoch; the member back under the same name gets its node id
// back and a share again.
func TestMembersShareUnits(t *testing.T) {
	eps := etcdEndpoints(t)
	prefix := newPrefix(t)
	a, b, c := join(t, eps, prefix, "a"), join(t, eps, prefix, "b"), join(t, eps, prefix, "c")
	defer a.Close()
	defer b.Close()
	us := units(30)
	if err := a.AddUnits(context.Background(), us...); err != nil {
		t.Fatal(err)
	}
	ids := []int32{a.ID(), b.ID(), c.ID()}
	if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
		t.Fatalf("node ids %v not distinct", ids)
	}
	v1 := waitView(t, a, 10*time.Second, "30 units spread over 3 nodes", settled(us, ids...))
	for _, m := range []*Member{b, c} {
		waitView(t, m, 5*time.Second, "the same assignment", func(v View) bool { return fmt.Sprint(v.Owners) == fmt.Sprint(v1.Owners) })
	}
	if n := controllers(a, b, c); n != 1 {
		t.Fatalf("%d controllers, want 1", n)
	}
	t.Logf("assignment settled; controller count 1; moves written %d", a.Stats().Moves+b.Stats().Moves+c.Stats().Moves)

	// Kill c: its lease expires after the TTL.
	killed := time.Now()
	cID := c.ID()
	c.crash()
	v2 := waitView(t, a, 10*time.Second, "c's units on a and b", settled(us, a.ID(), b.ID()))
	t.Logf("units of the killed node moved within %s", time.Since(killed).Round(time.Millisecond))
	moved := 0
	for _, u := range us {
		before, after := v1.Owners[u], v2.Owners[u]
		switch {
		case before.Node == cID:
			moved++
			if after.Epoch <= before.Epoch {
				t.Errorf("unit %s moved from %d to %d at epoch %d, not above %d", u, cID, after.Node, after.Epoch, before.Epoch)
			}
		case before != after:
			t.Errorf("unit %s of a live node moved: %+v -> %+v", u, before, after)
		}
	}
	if moved != 10 {
		t.Errorf("%d units moved, want the 10 of the killed node", moved)
	}

	// c again under its name: the same node id, and a share.
	c2 := join(t, eps, prefix, "c")
	defer c2.Close()
	if c2.ID() != cID {
		t.Errorf("restarted member got node id %d, want %d", c2.ID(), cID)
	}
	waitView(t, a, 10*time.Second, "30 units spread over 3 nodes again", settled(us, a.ID(), b.ID(), c2.ID()))
	if n := controllers(a, b, c2); n != 1 {
		t.Fatalf("%d controllers, want 1", n)
	}
}

// TestControllerMoves closes the controller: another member takes over
// and still assigns new units.
func TestControllerMoves(t *testing.T) {
	eps := etcdEndpoints(t)
	prefix := newPrefix(t)
	ms := []*Member{join(t, eps, prefix, "a"), join(t, eps, prefix, "b")}
	defer func() {
		for _, m := range ms {
			_ = m.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for controllers(ms...) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no controller elected within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	lead, other := ms[0], ms[1]
	if other.Stats().Controller {
		lead, other = other, lead
	}
	ms = []*Member{other}
	if err := lead.Close(); err != nil {
		t.Fatal(err)
	}
	us := units(4)
	if err := other.AddUnits(context.Background(), us...); err != nil {
		t.Fatal(err)
	}
	waitView(t, other, 10*time.Second, "the units on the remaining member", settled(us, other.ID()))
	if !other.Stats().Controller {
		t.Fatal("the remaining member is not the controller")
	}
	if err := other.RemoveUnits(context.Background(), us[:2]...); err != nil {
		t.Fatal(err)
	}
	waitView(t, other, 10*time.Second, "two units left", func(v View) bool { return len(v.Owners) == 2 })
}

// TestJoinRefused covers the startup errors: an unreachable etcd, a prefix
// of another cluster or storage, and a name a live member holds.
func TestJoinRefused(t *testing.T) {
	eps := etcdEndpoints(t)
	prefix := newPrefix(t)
	a := join(t, eps, prefix, "a")
	defer a.Close()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unreachable", Config{Endpoints: []string{"127.0.0.1:1"}, Cluster: "c", Name: "x", Addr: "x:1", DialTimeout: time.Second}, "did not answer within 1s"},
		{"other storage", Config{Endpoints: eps, Prefix: prefix, Cluster: "c", Storage: "s3:other", Name: "x", Addr: "x:1"}, `belongs to cluster "c" on storage "nfs:/x", not "c" on "s3:other"`},
		{"other cluster", Config{Endpoints: eps, Prefix: prefix, Cluster: "d", Storage: "nfs:/x", Name: "x", Addr: "x:1"}, `belongs to cluster "c"`},
		{"live name", Config{Endpoints: eps, Prefix: prefix, Cluster: "c", Storage: "nfs:/x", Name: "a", Addr: "a:2", TTL: time.Second, DialTimeout: time.Second}, "already registered by a live process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			m, err := Join(context.Background(), tc.cfg)
			if err == nil {
				_ = m.Close()
				t.Fatal("Join succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Join error %q lacks %q", err, tc.want)
			}
			if tc.name != "unreachable" && !errors.Is(err, ErrIdentity) {
				t.Fatalf("Join error %v is not ErrIdentity", err)
			}
			if took := time.Since(start); took > 15*time.Second {
				t.Fatalf("Join took %s to fail", took)
			}
			t.Logf("refused in %s: %v", time.Since(start).Round(time.Millisecond), err)
		})
	}
}

// ownEtcd starts a three-member etcd cluster of the test's own (so that
// stopping members disturbs no other test) and returns its endpoints and
// a ctl function.
func ownEtcd(t *testing.T) ([]string, func(args ...string)) {
	t.Helper()
	testbed.SkipShort(t, "an etcd cluster of its own")
	dir := t.TempDir()
	script := func(name string, args ...string) string {
		cmd := exec.Command(filepath.Join(testbed.RepoRoot(), "testbed", name), append([]string{"etcd"}, args...)...)
		cmd.Env = append(os.Environ(), "STRATA_TESTBED_DIR="+dir)
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("testbed/%s etcd %v: %v\n%s", name, args, err, ee.Stderr)
			}
			t.Fatalf("testbed/%s etcd %v: %v", name, args, err)
		}
		return string(out)
	}
	out := script("up")
	t.Cleanup(func() { script("down") })
	eps, ok := strings.CutPrefix(strings.TrimSpace(out), "export STRATA_ETCD_ENDPOINTS=")
	if !ok {
		t.Fatalf("testbed/up etcd printed %q", out)
	}
	return strings.Split(eps, ","), func(args ...string) { script("ctl", args...) }
}

// TestQuorum stops etcd members under three members: one stopped changes
// nothing; with quorum lost the members keep their units and lose their
// leases; with quorum back they register again and nothing moved.
func TestQuorum(t *testing.T) {
	eps, ctl := ownEtcd(t)
	prefix := newPrefix(t)
	ms := []*Member{join(t, eps, prefix, "a"), join(t, eps, prefix, "b"), join(t, eps, prefix, "c")}
	defer func() {
		for _, m := range ms {
			_ = m.Close()
		}
	}()
	us := units(12)
	if err := ms[0].AddUnits(context.Background(), us...); err != nil {
		t.Fatal(err)
	}
	ids := []int32{ms[0].ID(), ms[1].ID(), ms[2].ID()}
	v1 := waitView(t, ms[0], 10*time.Second, "12 units over 3 nodes", settled(us, ids...))

	ctl("stop", "1")
	time.Sleep(4 * time.Second) // two TTLs
	for _, m := range ms {
		if s := m.Stats(); s.Lease != LeaseHeld || s.LeaseLosses != 0 {
			t.Fatalf("node %d with one etcd member stopped: %+v", m.ID(), s)
		}
		if v := m.View(); fmt.Sprint(v.Owners) != fmt.Sprint(v1.Owners) {
			t.Fatalf("node %d: assignment changed with one etcd member stopped: %v -> %v", m.ID(), v1.Owners, v.Owners)
		}
	}

	ctl("stop", "2")
	for _, m := range ms {
		waitLease(t, m, LeaseLost, 15*time.Second, "after quorum was lost")
		if v := m.View(); fmt.Sprint(v.Owners) != fmt.Sprint(v1.Owners) {
			t.Fatalf("node %d: assignment changed without quorum", m.ID())
		}
	}
	t.Log("quorum lost: every member lost its lease and kept its units")

	ctl("start", "2")
	for _, m := range ms {
		waitLease(t, m, LeaseHeld, 20*time.Second, "after quorum returned")
	}
	ctl("start", "1")
	time.Sleep(2 * time.Second)
	for _, m := range ms {
		v := waitView(t, m, 10*time.Second, "3 nodes again", settled(us, ids...))
		if fmt.Sprint(v.Owners) != fmt.Sprint(v1.Owners) {
			t.Errorf("node %d: units moved across the quorum loss: %v -> %v", m.ID(), v1.Owners, v.Owners)
		}
	}
	if n := controllers(ms...); n != 1 {
		t.Fatalf("%d controllers after quorum returned, want 1", n)
	}
}

// waitLease waits until m's lease is in state want.
func waitLease(t *testing.T, m *Member, want LeaseState, within time.Duration, when string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for m.Stats().Lease != want {
		if time.Now().After(deadline) {
			t.Fatalf("node %d: lease not %s within %s %s", m.ID(), want, within, when)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReregisterWithin: registering again after a lease loss gives each
// request half the TTL, at least 500 ms, at most DialTimeout.
func TestReregisterWithin(t *testing.T) {
	for _, c := range []struct{ ttl, dial, want time.Duration }{
		{2 * time.Second, 5 * time.Second, time.Second},
		{10 * time.Second, 5 * time.Second, 5 * time.Second},
		{200 * time.Millisecond, 5 * time.Second, 500 * time.Millisecond},
		{2 * time.Second, 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		if got := reregisterWithin(Config{TTL: c.ttl, DialTimeout: c.dial}); got != c.want {
			t.Errorf("TTL %v, DialTimeout %v: %v, want %v", c.ttl, c.dial, got, c.want)
		}
	}
}
