package cluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Config configures a Member. Endpoints, Cluster and Name are required.
type Config struct {
	// Endpoints are the etcd client endpoints (HOST:PORT or URLs).
	Endpoints []string
	// Prefix is the etcd key prefix of the cluster's keys. Default
	// "/strata/" + Cluster + "/".
	Prefix string
	// Cluster is the cluster name; a member of another cluster on the same
	// prefix is refused.
	Cluster string
	// Storage identifies the cluster's storage (e.g. driver and location);
	// a member with another Storage on the same prefix is refused, so that
	// it can never fence the others' partitions.
	Storage string
	// Name identifies this broker across restarts (e.g. its advertised
	// address): a restarted broker gets its node id back.
	Name string
	// Addr is the HOST:PORT clients are told to connect to.
	Addr string
	// TTL is the lease TTL: a broker that stops renewing is gone after it.
	// Default 2s (etcd rounds it to whole seconds, at least 1).
	TTL time.Duration
	// DialTimeout bounds the startup check of the endpoints. Default 5s.
	DialTimeout time.Duration
	// TLS, when set, is used for the client connections to etcd.
	TLS *tls.Config
	// Username and Password authenticate to etcd when set.
	Username, Password string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// Node is one live broker.
type Node struct {
	// ID is the broker's node id (Kafka's broker id).
	ID int32 `json:"id"`
	// Addr is the HOST:PORT clients connect to.
	Addr string `json:"addr"`
	// Name is the broker's Config.Name.
	Name string `json:"name"`
}

// Owner is the owner of one unit and the epoch it must open it at.
type Owner struct {
	// Node is the owning node id.
	Node int32
	// Epoch grows with every assignment of the unit (the assignment key's
	// mod revision): a new owner opens the unit's streams at a higher
	// epoch than any earlier owner's, so the storage fences the old one.
	Epoch int32
}

// View is a snapshot of the cluster as this member last saw it.
type View struct {
	// Nodes are the live brokers by id.
	Nodes map[int32]Node
	// Owners are the units' owners.
	Owners map[string]Owner
	// Topics are the cluster's topic records by name (PutTopic).
	Topics map[string][]byte
}

// LeaseState says whether a member holds its lease.
type LeaseState int

const (
	// LeaseHeld: the member renews its lease.
	LeaseHeld LeaseState = iota
	// LeaseLost: renewals failed for a TTL (etcd unreachable or without
	// quorum); the member registers again when etcd answers.
	LeaseLost
)

func (s LeaseState) String() string {
	if s == LeaseHeld {
		return "held"
	}
	return "lost"
}

// Stats are a member's counters.
type Stats struct {
	// Lease is the lease state.
	Lease LeaseState
	// Controller is true while this member is the controller.
	Controller bool
	// Moves counts the unit assignments this member wrote as controller.
	Moves int64
	// LeaseLosses counts the times the lease was lost.
	LeaseLosses int64
}

// ErrIdentity is returned by Join when the prefix belongs to a cluster of
// another name or storage.
var ErrIdentity = errors.New("cluster identity mismatch")

// identity is the value of PREFIX/identity.
type identity struct {
	Cluster string `json:"cluster"`
	Storage string `json:"storage"`
}

// Member is one broker's membership of the cluster.
type Member struct {
	cfg    Config
	log    *slog.Logger
	cli    *clientv3.Client
	id     int32
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	view    View
	changed chan struct{} // closed and replaced on every view change
	lease   LeaseState
	session *concurrency.Session
	leading atomic.Bool
	leaving bool // Leave was called: not registered again
	moves   atomic.Int64
	losses  atomic.Int64
	kick    chan struct{} // the controller recomputes
}

func (c *Config) key(parts ...string) string { return c.Prefix + strings.Join(parts, "/") }

// Join connects to etcd, checks the cluster identity, takes this broker's
// node id (the same as last time for the same Name), registers under a
// lease and starts watching the cluster and campaigning for controller.
// An unreachable etcd is an error within DialTimeout.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if len(cfg.Endpoints) == 0 || cfg.Cluster == "" || cfg.Name == "" || cfg.Addr == "" {
		return nil, errors.New("cluster: Config.Endpoints, Cluster, Name and Addr are required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/strata/" + cfg.Cluster + "/"
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	cfg.TTL = cmp.Or(max(cfg.TTL, 0), 2*time.Second)
	cfg.DialTimeout = cmp.Or(max(cfg.DialTimeout, 0), 5*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints, DialTimeout: cfg.DialTimeout,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
		TLS: cfg.TLS, Username: cfg.Username, Password: cfg.Password,
		Logger: zapNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd client for %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	m := &Member{cfg: cfg, log: cfg.Logger, cli: cli, ctx: mctx, cancel: cancel,
		changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	fail := func(err error) (*Member, error) {
		cancel()
		_ = cli.Close()
		return nil, err
	}
	cctx, ccancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer ccancel()
	if err := m.checkIdentity(cctx); err != nil {
		return fail(err)
	}
	if m.id, err = m.nodeID(cctx); err != nil {
		return fail(err)
	}
	m.log = m.log.With("node", m.id)
	if err := m.register(ctx, cfg.DialTimeout); err != nil {
		return fail(err)
	}
	rev, err := m.load(cctx)
	if err != nil {
		return fail(err)
	}
	m.wg.Add(3)
	go m.watch(rev)
	go m.keepRegistered()
	go m.campaign()
	return m, nil
}

// etcdErr names the endpoints in an error of etcd.
func (m *Member) etcdErr(what string, err error) error {
	return m.etcdErrWithin(what, err, m.cfg.DialTimeout)
}

// etcdErrWithin is etcdErr of a request given within to answer.
func (m *Member) etcdErrWithin(what string, err error, within time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cluster %s: %s: etcd at %s did not answer within %s: %w", m.cfg.Cluster, what, strings.Join(m.cfg.Endpoints, ","), within, err)
	}
	return fmt.Errorf("cluster %s: %s: etcd at %s: %w", m.cfg.Cluster, what, strings.Join(m.cfg.Endpoints, ","), err)
}

// checkIdentity claims the prefix for this cluster and storage, or checks
// that it holds them.
func (m *Member) checkIdentity(ctx context.Context) error {
	want, _ := json.Marshal(identity{Cluster: m.cfg.Cluster, Storage: m.cfg.Storage})
	k := m.cfg.key("identity")
	resp, err := m.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(want))).
		Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return m.etcdErr("checking the cluster identity", err)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return fmt.Errorf("cluster %s: %s vanished while checking it: %w", m.cfg.Cluster, k, ErrIdentity)
	}
	var have identity
	if err := json.Unmarshal(kvs[0].Value, &have); err != nil || have != (identity{Cluster: m.cfg.Cluster, Storage: m.cfg.Storage}) {
		return fmt.Errorf("cluster %s: etcd prefix %s belongs to cluster %q on storage %q, not %q on %q: refusing to join: %w",
			m.cfg.Cluster, m.cfg.Prefix, have.Cluster, have.Storage, m.cfg.Cluster, m.cfg.Storage, ErrIdentity)
	}
	return nil
}

// nodeID returns the node id recorded for Name, allocating the next one
// the first time.
func (m *Member) nodeID(ctx context.Context) (int32, error) {
	nameKey := m.cfg.key("names", m.cfg.Name)
	nextKey := m.cfg.key("next-node-id")
	for {
		resp, err := m.cli.Txn(ctx).Then(clientv3.OpGet(nameKey), clientv3.OpGet(nextKey)).Commit()
		if err != nil {
			return 0, m.etcdErr("reading the node id of "+m.cfg.Name, err)
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return parseID(kvs[0].Value)
		}
		next, nextRev := int32(1), int64(0)
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
			if next, err = parseID(kvs[0].Value); err != nil {
				return 0, err
			}
			nextRev = kvs[0].ModRevision
		}
		id := strconv.Itoa(int(next))
		put, err := m.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(nameKey), "=", 0), clientv3.Compare(clientv3.ModRevision(nextKey), "=", nextRev)).
			Then(clientv3.OpPut(nameKey, id), clientv3.OpPut(nextKey, strconv.Itoa(int(next)+1))).Commit()
		if err != nil {
			return 0, m.etcdErr("allocating a node id for "+m.cfg.Name, err)
		}
		if put.Succeeded {
			return next, nil
		}
	}
}

func parseID(b []byte) (int32, error) {
	n, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("cluster: bad node id %q in etcd", b)
	}
	return int32(n), nil
}

// ID is this broker's node id.
func (m *Member) ID() int32 { return m.id }

// register puts PREFIX/brokers/ID under a new session's lease. A key left
// by this broker's earlier session (the same process after a lease loss,
// or a killed process whose lease has not expired yet) is replaced once it
// is gone or was ours; another live process with the same Name is refused.
//
// Each request has within to answer. Registering again after a lease loss
// gives it less than DialTimeout: etcd drops a proposal made while it has
// no leader, and the request then waits out its deadline, so a broker
// whose first request raced etcd's election would register only seconds
// after the others, its earlier lease expired, and the controller would
// move its units meanwhile.
func (m *Member) register(ctx context.Context, within time.Duration) error {
	ttl := max(1, int(math.Round(m.cfg.TTL.Seconds())))
	sctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	lease, err := m.cli.Grant(sctx, int64(ttl))
	if err != nil {
		return m.etcdErrWithin("creating a lease", err, within)
	}
	s, err := concurrency.NewSession(m.cli, concurrency.WithTTL(ttl), concurrency.WithLease(lease.ID), concurrency.WithContext(m.ctx))
	if err != nil {
		rctx, rcancel := context.WithTimeout(m.ctx, within)
		_, _ = m.cli.Revoke(rctx, lease.ID)
		rcancel()
		return m.etcdErrWithin("keeping a lease alive", err, within)
	}
	node, _ := json.Marshal(Node{ID: m.id, Addr: m.cfg.Addr, Name: m.cfg.Name})
	k := m.cfg.key("brokers", strconv.Itoa(int(m.id)))
	var old clientv3.LeaseID
	m.mu.Lock()
	if m.session != nil {
		old = m.session.Lease()
	}
	m.mu.Unlock()
	deadline := time.Now().Add(2*m.cfg.TTL + m.cfg.DialTimeout)
	for {
		resp, err := m.cli.Txn(sctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, string(node), clientv3.WithLease(s.Lease()))).
			Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			_ = s.Close()
			return m.etcdErrWithin("registering broker "+k, err, within)
		}
		if resp.Succeeded {
			break
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue // deleted meanwhile
		}
		if kv := kvs[0]; old != 0 && clientv3.LeaseID(kv.Lease) == old {
			// Our own earlier lease survived (etcd lost quorum and kept
			// it): move the key to the new lease in one step, so that the
			// controller never sees this broker gone, then let the old
			// lease go.
			r, err := m.cli.Txn(sctx).
				If(clientv3.Compare(clientv3.LeaseValue(k), "=", int64(old))).
				Then(clientv3.OpPut(k, string(node), clientv3.WithLease(s.Lease()))).Commit()
			if err != nil {
				_ = s.Close()
				return m.etcdErrWithin("registering broker "+k, err, within)
			}
			if !r.Succeeded {
				continue
			}
			_, _ = m.cli.Revoke(sctx, old)
			break
		}
		kv := kvs[0]
		if time.Now().After(deadline) {
			_ = s.Close()
			return fmt.Errorf("cluster %s: broker %s (node %d) is already registered by a live process (%s): %w", m.cfg.Cluster, m.cfg.Name, m.id, kv.Value, ErrIdentity)
		}
		// A killed process's lease expires within its TTL.
		select {
		case <-sctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
		if sctx.Err() != nil {
			sctx, cancel = context.WithTimeout(ctx, within)
			defer cancel()
		}
	}
	m.mu.Lock()
	m.session = s
	m.lease = LeaseHeld
	m.mu.Unlock()
	m.log.Info("registered in the cluster", "key", k, "lease", fmt.Sprintf("%x", s.Lease()), "ttl", ttl)
	return nil
}

// reregisterWithin is how long each request of registering again after
// a lease loss has to answer: half the TTL (at least 500 ms, at most
// DialTimeout), so that a request etcd dropped is made again while this
// broker's earlier lease, which etcd renews when it elects a leader,
// still holds its key.
func reregisterWithin(cfg Config) time.Duration {
	return min(max(cfg.TTL/2, 500*time.Millisecond), cfg.DialTimeout)
}

// keepRegistered registers again whenever the lease is lost.
func (m *Member) keepRegistered() {
	defer m.wg.Done()
	for {
		m.mu.Lock()
		s := m.session
		m.mu.Unlock()
		select {
		case <-m.ctx.Done():
			return
		case <-s.Done():
		}
		if m.ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		m.lease = LeaseLost
		leaving := m.leaving
		m.mu.Unlock()
		if leaving {
			m.notify()
			return
		}
		m.losses.Add(1)
		m.log.Warn("cluster lease lost: etcd unreachable or without quorum; keeping the partitions owned (the storage fences them if they move) and registering again")
		m.notify()
		for attempt := 0; m.ctx.Err() == nil; attempt++ {
			if err := m.register(m.ctx, reregisterWithin(m.cfg)); err == nil {
				m.notify()
				break
			} else if attempt%10 == 0 {
				m.log.Warn("registering again failed; retrying", "err", err)
			}
			select {
			case <-m.ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// load reads the cluster's keys into the view and returns their revision.
func (m *Member) load(ctx context.Context) (int64, error) {
	resp, err := m.cli.Get(ctx, m.cfg.Prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, m.etcdErr("reading the cluster", err)
	}
	v := View{Nodes: map[int32]Node{}, Owners: map[string]Owner{}, Topics: map[string][]byte{}}
	for _, kv := range resp.Kvs {
		m.apply(&v, string(kv.Key), kv.Value, kv.ModRevision, false)
	}
	m.mu.Lock()
	m.view = v
	m.mu.Unlock()
	m.notify()
	return resp.Header.Revision, nil
}

// apply changes v by one key's put (or delete).
func (m *Member) apply(v *View, key string, val []byte, rev int64, deleted bool) {
	rest, ok := strings.CutPrefix(key, m.cfg.Prefix)
	if !ok {
		return
	}
	kind, name, _ := strings.Cut(rest, "/")
	switch kind {
	case "brokers":
		id, err := parseID([]byte(name))
		if err != nil {
			return
		}
		if deleted {
			delete(v.Nodes, id)
			return
		}
		var n Node
		if json.Unmarshal(val, &n) == nil {
			v.Nodes[id] = n
		}
	case "topics":
		if deleted {
			delete(v.Topics, name)
			return
		}
		v.Topics[name] = val
	case "assign":
		if deleted {
			delete(v.Owners, name)
			return
		}
		id, err := parseID(val)
		if err != nil || rev > math.MaxInt32 {
			m.log.Error("ignoring an assignment", "unit", name, "value", string(val), "revision", rev)
			return
		}
		v.Owners[name] = Owner{Node: id, Epoch: int32(rev)}
	}
}

// watch follows the cluster's keys from revision rev+1.
func (m *Member) watch(rev int64) {
	defer m.wg.Done()
	for m.ctx.Err() == nil {
		wc := m.cli.Watch(m.ctx, m.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for wr := range wc {
			if err := wr.Err(); err != nil {
				m.log.Warn("watching the cluster failed; reading it again", "err", err)
				break
			}
			m.mu.Lock()
			v := m.view.clone()
			for _, ev := range wr.Events {
				m.apply(&v, string(ev.Kv.Key), ev.Kv.Value, ev.Kv.ModRevision, ev.Type == clientv3.EventTypeDelete)
			}
			m.view = v
			m.mu.Unlock()
			rev = wr.Header.Revision
			m.notify()
		}
		for m.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(m.ctx, m.cfg.DialTimeout)
			r, err := m.load(ctx)
			cancel()
			if err == nil {
				rev = r
				break
			}
			select {
			case <-m.ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

func (v View) clone() View {
	c := View{Nodes: make(map[int32]Node, len(v.Nodes)), Owners: make(map[string]Owner, len(v.Owners)), Topics: make(map[string][]byte, len(v.Topics))}
	for k, t := range v.Topics {
		c.Topics[k] = t
	}
	for k, n := range v.Nodes {
		c.Nodes[k] = n
	}
	for k, o := range v.Owners {
		c.Owners[k] = o
	}
	return c
}

// notify wakes whoever waits on Changed and the controller.
func (m *Member) notify() {
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// View returns the current view (a copy).
func (m *Member) View() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view.clone()
}

// Changed returns a channel closed at the next change of the view or of
// the lease state.
func (m *Member) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Stats returns the member's counters.
func (m *Member) Stats() Stats {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	return Stats{Lease: lease, Controller: m.leading.Load(), Moves: m.moves.Load(), LeaseLosses: m.losses.Load()}
}

// AddUnits records units to be assigned (topic partitions, offsets
// shards): the controller assigns them to live brokers.
func (m *Member) AddUnits(ctx context.Context, units ...string) error {
	return m.batch(ctx, units, func(u string) clientv3.Op { return clientv3.OpPut(m.cfg.key("units", u), "") })
}

// RemoveUnits forgets units (a deleted topic's partitions) and their
// assignments.
func (m *Member) RemoveUnits(ctx context.Context, units ...string) error {
	var ops []string
	for _, u := range units {
		ops = append(ops, m.cfg.key("units", u), m.cfg.key("assign", u))
	}
	return m.batch(ctx, ops, func(k string) clientv3.Op { return clientv3.OpDelete(k) })
}

// ErrTopicExists is returned by PutTopic when the topic exists already.
var ErrTopicExists = errors.New("topic exists")

// PutTopic records a topic and the units of its partitions in one
// transaction. With create set it fails with ErrTopicExists when the
// topic is recorded already; otherwise the topic must exist (a change,
// such as more partitions). len(units) is at most 99 per call plus what
// AddUnits adds after it.
func (m *Member) PutTopic(ctx context.Context, name string, record []byte, create bool, units []string) error {
	k := m.cfg.key("topics", name)
	cond := clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	if !create {
		cond = clientv3.Compare(clientv3.CreateRevision(k), ">", 0)
	}
	first := units[:min(len(units), maxTxnOps-1)]
	ops := []clientv3.Op{clientv3.OpPut(k, string(record))}
	for _, u := range first {
		ops = append(ops, clientv3.OpPut(m.cfg.key("units", u), ""))
	}
	resp, err := m.cli.Txn(ctx).If(cond).Then(ops...).Commit()
	if err != nil {
		return m.etcdErr("recording topic "+name, err)
	}
	if !resp.Succeeded {
		if create {
			return fmt.Errorf("cluster %s: topic %s: %w", m.cfg.Cluster, name, ErrTopicExists)
		}
		return fmt.Errorf("cluster %s: topic %s is not recorded", m.cfg.Cluster, name)
	}
	return m.AddUnits(ctx, units[len(first):]...)
}

// DeleteTopic forgets a topic and the units of its partitions.
func (m *Member) DeleteTopic(ctx context.Context, name string, units []string) error {
	if _, err := m.cli.Delete(ctx, m.cfg.key("topics", name)); err != nil {
		return m.etcdErr("deleting topic "+name, err)
	}
	return m.RemoveUnits(ctx, units...)
}

// maxTxnOps stays under etcd's default --max-txn-ops of 128.
const maxTxnOps = 100

func (m *Member) batch(ctx context.Context, items []string, op func(string) clientv3.Op) error {
	for len(items) > 0 {
		n := min(len(items), maxTxnOps)
		ops := make([]clientv3.Op, 0, n)
		for _, it := range items[:n] {
			ops = append(ops, op(it))
		}
		if _, err := m.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return m.etcdErr("updating units", err)
		}
		items = items[n:]
	}
	return nil
}

// Leave takes this broker out of the cluster's live brokers while it
// keeps running, for a graceful stop: its broker key is deleted (its lease
// stays, and with it the controller role if it holds it), so the
// controller assigns its units to the other brokers, and the broker can
// hand them over (answering with their new owners) before Close. It is not
// registered again after that, even after a lease loss.
func (m *Member) Leave(ctx context.Context) error {
	m.mu.Lock()
	m.leaving = true
	s := m.session
	m.mu.Unlock()
	if s == nil {
		return nil
	}
	k := m.cfg.key("brokers", strconv.Itoa(int(m.id)))
	_, err := m.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(k), "=", int64(s.Lease()))).
		Then(clientv3.OpDelete(k)).Commit()
	if err != nil {
		return m.etcdErr("leaving the cluster (deleting "+k+")", err)
	}
	m.log.Info("left the cluster's live brokers; the controller moves this broker's units", "key", k)
	return nil
}

// Close stops the member: it resigns as controller and revokes its lease,
// so the controller moves its units at once.
func (m *Member) Close() error {
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	s := m.session
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.DialTimeout)
	defer cancel()
	if s != nil {
		_, _ = m.cli.Revoke(ctx, s.Lease())
	}
	return m.cli.Close()
}

// crash stops the member without revoking its lease, as a killed process
// would: the lease expires after its TTL.
func (m *Member) crash() {
	m.cancel()
	_ = m.cli.Close()
	m.wg.Wait()
}
