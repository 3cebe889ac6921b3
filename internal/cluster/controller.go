package cluster

import (
	"context"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// reconcileEvery is how often a controller recomputes the assignment
// without a change having woken it.
const reconcileEvery = 5 * time.Second

// campaign runs for controller under the current session and, once
// elected, leads until the session ends; then it campaigns again.
func (m *Member) campaign() {
	defer m.wg.Done()
	for m.ctx.Err() == nil {
		m.mu.Lock()
		s, held := m.session, m.lease == LeaseHeld
		m.mu.Unlock()
		if !held {
			select {
			case <-m.ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		ctx, cancel := context.WithCancel(m.ctx)
		go func() {
			select {
			case <-s.Done():
			case <-ctx.Done():
			}
			cancel()
		}()
		e := concurrency.NewElection(s, m.cfg.key("controller"))
		if err := e.Campaign(ctx, strconv.Itoa(int(m.id))); err != nil {
			cancel()
			select {
			case <-m.ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		m.leading.Store(true)
		m.log.Info("elected cluster controller", "key", e.Key())
		m.lead(ctx, e)
		m.leading.Store(false)
		cancel()
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		_ = e.Resign(rctx)
		rcancel()
		m.log.Info("no longer the cluster controller")
	}
}

// lead reconciles the assignment on every change until ctx ends.
func (m *Member) lead(ctx context.Context, e *concurrency.Election) {
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		if err := m.reconcile(ctx, e); err != nil && ctx.Err() == nil {
			m.log.Warn("assigning units failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-t.C:
		}
	}
}

// reconcile reads the live brokers, units and assignments at one revision
// and writes the assignments that change, each write conditional on this
// member still holding the controller key: a deposed controller writes
// nothing.
func (m *Member) reconcile(ctx context.Context, e *concurrency.Election) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	defer cancel()
	resp, err := m.cli.Txn(ctx).Then(
		clientv3.OpGet(m.cfg.key("brokers")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(m.cfg.key("units")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(m.cfg.key("assign")+"/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return m.etcdErr("reading the cluster to assign units", err)
	}
	var nodes []int32
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		if id, err := parseID([]byte(strings.TrimPrefix(string(kv.Key), m.cfg.key("brokers")+"/"))); err == nil {
			nodes = append(nodes, id)
		}
	}
	var units []string
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		units = append(units, strings.TrimPrefix(string(kv.Key), m.cfg.key("units")+"/"))
	}
	current := map[string]int32{}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		if id, err := parseID(kv.Value); err == nil {
			current[strings.TrimPrefix(string(kv.Key), m.cfg.key("assign")+"/")] = id
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	want := Assign(units, nodes, current)
	var changed []string
	for u, n := range want {
		if current[u] != n {
			changed = append(changed, u)
		}
	}
	var gone []string
	for u := range current {
		if _, ok := want[u]; !ok {
			gone = append(gone, u)
		}
	}
	leader := clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())
	for len(changed)+len(gone) > 0 {
		var ops []clientv3.Op
		for len(ops) < maxTxnOps && len(changed) > 0 {
			u := changed[0]
			changed = changed[1:]
			ops = append(ops, clientv3.OpPut(m.cfg.key("assign", u), strconv.Itoa(int(want[u]))))
		}
		for len(ops) < maxTxnOps && len(gone) > 0 {
			ops = append(ops, clientv3.OpDelete(m.cfg.key("assign", gone[0])))
			gone = gone[1:]
		}
		r, err := m.cli.Txn(ctx).If(leader).Then(ops...).Commit()
		if err != nil {
			return m.etcdErr("writing assignments", err)
		}
		if !r.Succeeded {
			m.log.Warn("no longer the controller: assignments not written")
			return nil
		}
		m.moves.Add(int64(len(ops)))
	}
	return nil
}
