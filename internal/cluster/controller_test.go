package cluster

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestDeposedControllerWritesNothing: a reconcile under an election whose
// controller key is gone (a controller that lost its lease, or was paused
// past it, and has not noticed yet) writes no assignment, however stale
// its view; the same reconcile by the elected controller writes them.
func TestDeposedControllerWritesNothing(t *testing.T) {
	eps := etcdEndpoints(t)
	ctx := context.Background()
	cfg := Config{Endpoints: eps, Prefix: newPrefix(t), Cluster: "c", DialTimeout: 5 * time.Second}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: cfg.DialTimeout, Logger: zapNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// A live broker and two units, nothing assigned: a reconcile has two
	// assignments to write.
	for _, k := range []string{cfg.key("brokers", "1"), cfg.key("units", "u0"), cfg.key("units", "u1")} {
		if _, err := cli.Put(ctx, k, ""); err != nil {
			t.Fatal(err)
		}
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := concurrency.NewElection(s, cfg.key("controller"))
	if err := e.Campaign(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	deposed := concurrency.ResumeElection(s, cfg.key("controller"), e.Key(), e.Rev())
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	m := &Member{cfg: cfg, cli: cli, log: testLogger(t)}
	assigned := func() int64 {
		t.Helper()
		resp, err := cli.Get(ctx, cfg.key("assign")+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if err := m.reconcile(ctx, deposed); err != nil {
		t.Fatal(err)
	}
	if n, moves := assigned(), m.moves.Load(); n != 0 || moves != 0 {
		t.Fatalf("a deposed controller wrote %d assignments (moves counted: %d)", n, moves)
	}
	if err := e.Campaign(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	if err := m.reconcile(ctx, e); err != nil {
		t.Fatal(err)
	}
	if n, moves := assigned(), m.moves.Load(); n != 2 || moves != 2 {
		t.Fatalf("the elected controller wrote %d assignments (moves counted: %d), want 2", n, moves)
	}
}
