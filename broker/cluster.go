package broker

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/internal/cluster"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/stream"
)

// offsetsUnit is the cluster unit of the group offsets (one shard): its
// owner opens CLUSTER/__offsets and coordinates every group.
const offsetsUnit = "offsets"

// clusterState is what a broker of an etcd-coordinated cluster keeps
// besides the single-node state: which units it owns, at which epochs.
type clusterState struct {
	m *cluster.Member
	// mu guards owned, offsetsEpoch and openCh.
	mu sync.Mutex
	// owned maps the units this broker has open to their epochs.
	owned        map[string]int32
	offsetsEpoch int32
	// openCh is closed at the next partition open (openC, opened).
	openCh chan struct{}
	// opens counts partition opens after a move to this broker; fences
	// counts partitions dropped because a newer owner fenced them.
	opens, fences, releases int64
	// hinted is when a Produce was last answered with a partition's new
	// owner (unix nanoseconds; Leave waits for it to go quiet).
	hinted atomic.Int64
}

// unitOf is the cluster unit of a partition.
func unitOf(p *partition) string {
	return "p/" + hex.EncodeToString(p.topic.id[:]) + "/" + strconv.Itoa(int(p.index))
}

// unitsOf lists the units of a topic's partitions from..n-1.
func unitsOf(id [16]byte, from, n int32) []string {
	var us []string
	for i := from; i < n; i++ {
		us = append(us, "p/"+hex.EncodeToString(id[:])+"/"+strconv.Itoa(int(i)))
	}
	return us
}

// startClustered finishes New for a broker of an etcd-coordinated
// cluster: its node id is its member id, the catalog comes from etcd, and
// it opens only the partitions (and the group offsets) assigned to it,
// each at the epoch of its assignment.
func (b *Broker) startClustered(ctx context.Context) (*Broker, error) {
	m := b.cfg.Membership
	b.cl = &clusterState{m: m, owned: map[string]int32{}}
	b.nodeID = m.ID()
	b.log = b.log.With("cluster", b.cfg.Cluster, "node", b.nodeID)
	b.pids = &producerIDs{store: b.cfg.Store, name: b.streamName("__producer_ids")}
	b.offsets = &offsetStore{b: b, groups: map[string]map[tp]committed{}}
	b.catalog = &catalog{b: b, topics: map[string]*topic{}}
	b.groups = newGroupCoordinator(b)
	if err := m.AddUnits(ctx, offsetsUnit); err != nil {
		b.groups.close()
		return nil, fmt.Errorf("broker: cluster %s: %w", b.cfg.Cluster, err)
	}
	b.syncCluster(ctx)
	b.log.Info("broker joined the cluster", "topics", b.catalog.count(), "driver", b.cfg.Driver)
	b.wg.Add(1)
	go b.followCluster()
	return b, nil
}

// followCluster applies every change of the cluster view.
func (b *Broker) followCluster() {
	defer b.wg.Done()
	for {
		ch := b.cl.m.Changed()
		b.syncCluster(b.ctx)
		select {
		case <-b.ctx.Done():
			return
		case <-ch:
		case <-time.After(time.Second):
		}
	}
}

// syncCluster brings the catalog and the open units in line with the
// view: topics created and deleted, partitions opened at their new epoch
// or closed when they moved away.
func (b *Broker) syncCluster(ctx context.Context) {
	v := b.cl.m.View()
	b.syncCatalog(v)
	var open []*partition
	var release []*partition
	for _, t := range b.catalog.list() {
		b.catalog.mu.RLock()
		parts := append([]*partition(nil), t.parts...)
		b.catalog.mu.RUnlock()
		for _, p := range parts {
			o, assigned := v.Owners[unitOf(p)]
			p.mu.Lock()
			have, isOpen := p.epoch, p.log != nil || p.reopening
			p.mu.Unlock()
			switch {
			case assigned && o.Node == b.nodeID && (!isOpen || have != o.Epoch):
				if isOpen {
					// Assigned here again at a newer epoch (it moved and
					// came back while this broker's view was stale).
					_ = p.closeLog()
				}
				p.mu.Lock()
				p.epoch = o.Epoch
				p.mu.Unlock()
				open = append(open, p)
			case isOpen && (!assigned || o.Node != b.nodeID):
				release = append(release, p)
			}
		}
	}
	b.releasePartitions(release)
	if len(open) > 0 {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		failed := openPartitions(octx, open)
		cancel()
		bad := map[*partition]bool{}
		for _, f := range failed {
			bad[f.p] = true
		}
		for _, p := range open {
			if !bad[p] {
				b.noteOpened(p)
			}
		}
		b.keepFailed(failed)
	}
	b.syncOffsets(ctx, v)
}

// releasePartitions closes the partitions assigned elsewhere,
// partitionOpens at once: a close is a few dependent puts (a checkpoint,
// the stream-set tails compacted), and the sooner each is done the less
// the new owners' opens find to fence and settle.
func (b *Broker) releasePartitions(parts []*partition) {
	eachPartition(parts, func(p *partition) {
		start := time.Now()
		err := p.closeLog()
		b.cl.mu.Lock()
		delete(b.cl.owned, unitOf(p))
		b.cl.releases++
		b.cl.mu.Unlock()
		b.log.Info("partition moved away", "topic", p.topic.name, "partition", p.index,
			"took", time.Since(start).Round(time.Millisecond), "err", err)
	})
}

// noteOpened counts p, just opened at its assignment's epoch, as owned
// here (in a cluster; nothing on a single broker).
func (b *Broker) noteOpened(p *partition) {
	if b.cl == nil {
		return
	}
	p.mu.Lock()
	epoch := p.epoch
	p.mu.Unlock()
	b.cl.mu.Lock()
	b.cl.owned[unitOf(p)] = epoch
	b.cl.opens++
	b.cl.mu.Unlock()
}

// syncCatalog applies the topics of the view to the catalog.
func (b *Broker) syncCatalog(v cluster.View) {
	c := b.catalog
	for name, raw := range v.Topics {
		var r catalogRecord
		if err := json.Unmarshal(raw, &r); err != nil || r.Name != name {
			b.log.Error("ignoring a bad topic record in etcd", "topic", name, "err", err)
			continue
		}
		t := c.lookup(name)
		switch {
		case t == nil:
			_ = c.apply(r)
		case hex.EncodeToString(t.id[:]) != r.ID:
			// Deleted and created again under the same name.
			b.dropTopic(t)
			_ = c.apply(catalogRecord{Op: "delete", Name: name})
			_ = c.apply(r)
		case c.numPartitions(t) < r.Partitions:
			_ = c.apply(catalogRecord{Op: "partitions", Name: name, Partitions: r.Partitions})
		}
	}
	for _, t := range c.list() {
		if _, ok := v.Topics[t.name]; !ok {
			b.dropTopic(t)
			_ = c.apply(catalogRecord{Op: "delete", Name: t.name})
		}
	}
}

// dropTopic closes a deleted topic's partitions open here and deletes
// their streams, and forgets its committed offsets on the broker holding
// them. A partition no broker had open keeps its streams.
func (b *Broker) dropTopic(t *topic) {
	b.catalog.mu.RLock()
	parts := append([]*partition(nil), t.parts...)
	b.catalog.mu.RUnlock()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	for _, p := range parts {
		p.mu.Lock()
		open := p.log != nil || p.reopening // a failed one is retried here
		p.mu.Unlock()
		if !open {
			continue
		}
		_ = p.closeLog()
		b.cl.mu.Lock()
		delete(b.cl.owned, unitOf(p))
		b.cl.mu.Unlock()
		if err := sharedlog.Delete(ctx, t.store, p.name); err != nil && !errors.Is(err, stream.ErrNotFound) {
			b.log.Warn("deleting partition streams failed (the topic is gone from the catalog)", "topic", t.name, "partition", p.index, "err", err)
		}
	}
	if b.coordinates() {
		if err := b.offsets.forgetTopic(ctx, t.name); err != nil {
			b.log.Warn("removing committed offsets of a deleted topic failed", "topic", t.name, "err", err)
		}
	}
}

// syncOffsets opens the group offsets when their unit is assigned here
// (at its epoch) and closes them when it moved away; groups then rejoin
// at the new coordinator.
func (b *Broker) syncOffsets(ctx context.Context, v cluster.View) {
	o, assigned := v.Owners[offsetsUnit]
	mine := assigned && o.Node == b.nodeID
	b.cl.mu.Lock()
	have := b.cl.offsetsEpoch
	b.cl.mu.Unlock()
	switch {
	case mine && have != o.Epoch:
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := b.offsets.reopenAt(octx, o.Epoch)
		cancel()
		if err != nil {
			b.log.Error("opening the group offsets failed; retrying", "epoch", o.Epoch, "err", err)
			return
		}
		b.cl.mu.Lock()
		b.cl.offsetsEpoch = o.Epoch
		b.cl.mu.Unlock()
		b.log.Info("coordinating the consumer groups", "epoch", o.Epoch)
	case !mine && have != 0:
		b.groups.reset(kerr.NotCoordinator.Code)
		_ = b.offsets.release()
		b.cl.mu.Lock()
		b.cl.offsetsEpoch = 0
		b.cl.mu.Unlock()
		b.log.Info("the consumer groups moved to another broker")
	}
}

// reopenAt opens the offsets stream at epoch and loads it, replacing what
// the store held.
func (o *offsetStore) reopenAt(ctx context.Context, epoch int32) error {
	name := o.b.streamName("__offsets")
	s, err := o.b.cfg.Store.Open(ctx, name, stream.OpenOptions{Epoch: uint64(epoch), CreateIfMissing: true})
	if err != nil {
		return fmt.Errorf("broker: opening the group offsets %s at epoch %d on %s: %w", name, epoch, o.b.cfg.Driver, err)
	}
	o.commitMu.Lock()
	defer o.commitMu.Unlock()
	o.mu.Lock()
	o.groups = map[string]map[tp]committed{}
	o.mu.Unlock()
	o.batches = 0
	if err := readStream(ctx, s, o.replay); err != nil {
		_ = s.Close()
		return fmt.Errorf("broker: reading the group offsets %s on %s: %w", name, o.b.cfg.Driver, err)
	}
	if o.s != nil {
		_ = o.s.Close()
	}
	o.s = s
	return nil
}

// release closes the offsets stream (they moved to another broker).
func (o *offsetStore) release() error {
	o.commitMu.Lock()
	defer o.commitMu.Unlock()
	o.mu.Lock()
	o.groups = map[string]map[tp]committed{}
	o.mu.Unlock()
	if o.s == nil {
		return nil
	}
	err := o.s.Close()
	o.s = nil
	return err
}

// errNotCoordinator is the error of an offset commit on a broker that
// does not hold the group offsets.
var errNotCoordinator = errors.New("this broker does not coordinate groups")

// coordinator returns the node that holds the group offsets, if any.
func (b *Broker) coordinator() (cluster.Node, bool) {
	v := b.cl.m.View()
	o, ok := v.Owners[offsetsUnit]
	if !ok {
		return cluster.Node{}, false
	}
	n, ok := v.Nodes[o.Node]
	return n, ok
}

// coordinates reports whether this broker serves the group APIs: always
// on a single broker, and on the holder of the group offsets in a cluster.
func (b *Broker) coordinates() bool {
	if b.cl == nil {
		return true
	}
	b.cl.mu.Lock()
	defer b.cl.mu.Unlock()
	return b.cl.offsetsEpoch != 0
}

// notCoordinator fills resp with NOT_COORDINATOR for a group request sent
// to a broker of a cluster that does not hold the group offsets, and
// reports whether it did. ListGroups is answered with no groups.
func (b *Broker) notCoordinator(req kmsg.Request, resp kmsg.Response) bool {
	if b.coordinates() {
		return false
	}
	code := kerr.NotCoordinator.Code
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp.(*kmsg.JoinGroupResponse).ErrorCode = code
	case *kmsg.SyncGroupRequest:
		resp.(*kmsg.SyncGroupResponse).ErrorCode = code
	case *kmsg.HeartbeatRequest:
		resp.(*kmsg.HeartbeatResponse).ErrorCode = code
	case *kmsg.LeaveGroupRequest:
		resp.(*kmsg.LeaveGroupResponse).ErrorCode = code
	case *kmsg.OffsetCommitRequest:
		out := resp.(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.OffsetCommitResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				st.Partitions = append(st.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: rp.Partition, ErrorCode: code})
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.OffsetFetchRequest:
		resp.(*kmsg.OffsetFetchResponse).ErrorCode = code
	case *kmsg.DescribeGroupsRequest:
		out := resp.(*kmsg.DescribeGroupsResponse)
		for _, g := range r.Groups {
			out.Groups = append(out.Groups, kmsg.DescribeGroupsResponseGroup{Group: g, ErrorCode: code})
		}
	case *kmsg.ListGroupsRequest:
	default:
		return false
	}
	b.metrics.request(req.Key(), code)
	return true
}

// reset drops every group's membership, failing waiting requests with
// code (the coordinator moved: members find the new one and rejoin).
func (gc *groupCoordinator) reset(code int16) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for _, g := range gc.groups {
		if g.timer != nil {
			g.timer.Stop()
		}
		for _, m := range g.members {
			gc.failWaiters(g, m, code)
		}
	}
	gc.groups = map[string]*group{}
	gc.pending = map[string]time.Time{}
}

// clusterTopic records a catalog change in etcd: a create fails with
// TopicAlreadyExists when the topic is recorded already.
func (b *Broker) clusterTopic(ctx context.Context, r catalogRecord) error {
	m := b.cl.m
	switch r.Op {
	case "create":
		raw, _ := json.Marshal(r)
		var id [16]byte
		if _, err := hex.Decode(id[:], []byte(r.ID)); err != nil {
			return err
		}
		return m.PutTopic(ctx, r.Name, raw, true, unitsOf(id, 0, r.Partitions))
	case "partitions":
		t := b.catalog.lookup(r.Name)
		if t == nil {
			return fmt.Errorf("topic %s: %w", r.Name, stream.ErrNotFound)
		}
		rec := catalogRecord{Op: "create", Name: t.name, ID: hex.EncodeToString(t.id[:]), Partitions: r.Partitions, Configs: t.configs}
		raw, _ := json.Marshal(rec)
		return m.PutTopic(ctx, r.Name, raw, false, unitsOf(t.id, b.catalog.numPartitions(t), r.Partitions))
	case "delete":
		t := b.catalog.lookup(r.Name)
		if t == nil {
			return fmt.Errorf("topic %s: %w", r.Name, stream.ErrNotFound)
		}
		return m.DeleteTopic(ctx, r.Name, unitsOf(t.id, 0, b.catalog.numPartitions(t)))
	}
	return fmt.Errorf("unknown catalog op %q", r.Op)
}

// leaderOf returns the node and epoch leading p as the cluster view says
// (this broker and its epoch on a single broker).
func (b *Broker) leaderOf(v *cluster.View, p *partition) (int32, int32, bool) {
	if b.cl == nil || v == nil {
		return b.nodeID, b.epoch, true
	}
	if p == nil {
		return -1, -1, false
	}
	o, ok := v.Owners[unitOf(p)]
	if !ok {
		return -1, -1, false
	}
	if _, live := v.Nodes[o.Node]; !live {
		return -1, -1, false
	}
	// A partition assigned here and still being opened is led from here:
	// a Produce for it waits for the open (awaitOpen), so clients that
	// learn of the move go to the new owner at once.
	return o.Node, o.Epoch, true
}

// opened wakes the Produce requests waiting for a partition to open.
func (c *clusterState) opened() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.openCh != nil {
		close(c.openCh)
		c.openCh = nil
	}
}

// openC returns a channel closed at the next partition open.
func (c *clusterState) openC() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.openCh == nil {
		c.openCh = make(chan struct{})
	}
	return c.openCh
}

// openWait bounds how long a Produce waits for a partition assigned to
// this broker to open: an open after a move takes a fraction of a second;
// past this the client is told NOT_LEADER_OR_FOLLOWER naming this broker
// (leaderHint) and retries here. A variable for tests.
var openWait = 5 * time.Second

// awaitOpen waits, in a cluster, until p (assigned to this broker and
// being opened) is open, and returns its log; nil once p is assigned
// elsewhere, the wait is over or the broker stops.
func (b *Broker) awaitOpen(p *partition) *sharedlog.Log {
	if b.cl == nil || p == nil {
		return nil
	}
	timer := time.NewTimer(openWait)
	defer timer.Stop()
	for {
		ch := b.cl.openC()
		l, code := p.current()
		switch code {
		case 0:
			return l
		case kerr.KafkaStorageError.Code: // failed to open, retried
			return nil
		}
		if o, ok := b.cl.m.View().Owners[unitOf(p)]; !ok || o.Node != b.nodeID || b.fenced.Load() {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-b.ctx.Done():
			return nil
		}
	}
}

// movedCode is the error code of a Produce for p that failed here with
// code: NOT_LEADER_OR_FOLLOWER (which leaderHint then fills with the
// owner) once the cluster assigns p to another broker, whatever the local
// failure was. A partition that failed as it was handed over (an append
// cut short by the close: KAFKA_STORAGE_ERROR, or its reopen after such a
// failure) was answered with that code and no owner, and a client that
// does not refresh its metadata kept retrying the old owner until it
// exited.
func (b *Broker) movedCode(p *partition, code int16) int16 {
	if b.cl == nil || p == nil || code == 0 {
		return code
	}
	if o, ok := b.cl.m.View().Owners[unitOf(p)]; ok && o.Node != b.nodeID {
		return kerr.NotLeaderForPartition.Code
	}
	return code
}

// leaderHint fills a Produce answer of NOT_LEADER_OR_FOLLOWER for p with
// the partition's owner (KIP-951: v10+ clients move to it without a
// metadata refresh) and lists that broker in resp. The owner may be this
// broker, still opening p past openWait: named with the epoch the client
// was sent here with, a client retries here after its backoff (franz-go
// takes a hint of an epoch it knows as "retry on the same broker"),
// where without a hint it would wait for its next metadata refresh, an
// hour for a client that set MetadataMinAge so.
func (b *Broker) leaderHint(resp *kmsg.ProduceResponse, rp *kmsg.ProduceResponseTopicPartition, p *partition) {
	if b.cl == nil || p == nil || resp.Version < 10 || rp.ErrorCode != kerr.NotLeaderForPartition.Code {
		return
	}
	v := b.cl.m.View()
	o, ok := v.Owners[unitOf(p)]
	if !ok {
		return
	}
	n, live := v.Nodes[o.Node]
	if !live {
		return
	}
	host, port, err := splitAddr(n.Addr)
	if err != nil {
		return
	}
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = o.Node, o.Epoch
	if o.Node != b.nodeID {
		b.cl.hinted.Store(time.Now().UnixNano())
	}
	for _, rb := range resp.Brokers {
		if rb.NodeID == o.Node {
			return
		}
	}
	resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: o.Node, Host: host, Port: port})
}

// fencedInCluster handles a fence of p's log in a cluster: a newer owner
// opened it, so this broker drops that partition only.
func (p *partition) fencedInCluster(l *sharedlog.Log) {
	p.mu.Lock()
	if p.log != l {
		p.mu.Unlock()
		return
	}
	p.gen++
	p.log, p.err, p.reopening = nil, errors.New("fenced by a newer owner"), false
	p.mu.Unlock()
	_ = l.Close()
	b := p.b
	b.cl.mu.Lock()
	delete(b.cl.owned, unitOf(p))
	b.cl.fences++
	b.cl.mu.Unlock()
	b.log.Warn("partition fenced by a newer owner; no longer serving it", "topic", p.topic.name, "partition", p.index)
}

// ClusterStats are the counters of a broker in an etcd-coordinated
// cluster (zero on a single broker).
type ClusterStats struct {
	// Owned is the number of partitions this broker has open.
	Owned int
	// Coordinator is true while this broker holds the group offsets.
	Coordinator bool
	// Opens counts partitions opened here; Releases those that moved
	// away; Fences those dropped because a newer owner fenced them.
	Opens, Releases, Fences int64
	// Member are the member's counters (lease, controller, moves written).
	Member cluster.Stats
}

// ClusterStats returns the broker's cluster counters.
func (b *Broker) ClusterStats() ClusterStats {
	if b.cl == nil {
		return ClusterStats{}
	}
	b.cl.mu.Lock()
	defer b.cl.mu.Unlock()
	return ClusterStats{Owned: len(b.cl.owned), Coordinator: b.cl.offsetsEpoch != 0, Opens: b.cl.opens,
		Releases: b.cl.releases, Fences: b.cl.fences, Member: b.cl.m.Stats()}
}

// writeCluster writes the cluster metrics.
func writeCluster(p func(string, ...any), s ClusterStats) {
	held, ctl, coord := 0, 0, 0
	if s.Member.Lease == cluster.LeaseHeld {
		held = 1
	}
	if s.Member.Controller {
		ctl = 1
	}
	if s.Coordinator {
		coord = 1
	}
	p("# HELP strata_cluster_partitions_owned Partitions this broker has open in the cluster.\n# TYPE strata_cluster_partitions_owned gauge\nstrata_cluster_partitions_owned %d\n", s.Owned)
	p("# HELP strata_cluster_partition_opens_total Partitions opened on this broker after an assignment.\n# TYPE strata_cluster_partition_opens_total counter\nstrata_cluster_partition_opens_total %d\n", s.Opens)
	p("# HELP strata_cluster_partition_releases_total Partitions closed because they were assigned elsewhere.\n# TYPE strata_cluster_partition_releases_total counter\nstrata_cluster_partition_releases_total %d\n", s.Releases)
	p("# HELP strata_cluster_partition_fences_total Partitions dropped because a newer owner fenced them.\n# TYPE strata_cluster_partition_fences_total counter\nstrata_cluster_partition_fences_total %d\n", s.Fences)
	p("# HELP strata_cluster_lease_held 1 while the broker holds its etcd lease.\n# TYPE strata_cluster_lease_held gauge\nstrata_cluster_lease_held %d\n", held)
	p("# HELP strata_cluster_lease_losses_total Times the etcd lease was lost.\n# TYPE strata_cluster_lease_losses_total counter\nstrata_cluster_lease_losses_total %d\n", s.Member.LeaseLosses)
	p("# HELP strata_cluster_controller 1 while this broker is the cluster controller.\n# TYPE strata_cluster_controller gauge\nstrata_cluster_controller %d\n", ctl)
	p("# HELP strata_cluster_assignments_written_total Unit assignments written by this broker as controller (moves).\n# TYPE strata_cluster_assignments_written_total counter\nstrata_cluster_assignments_written_total %d\n", s.Member.Moves)
	p("# HELP strata_cluster_group_coordinator 1 while this broker holds the group offsets.\n# TYPE strata_cluster_group_coordinator gauge\nstrata_cluster_group_coordinator %d\n", coord)
}

// leaderEpoch is the epoch p is served at: its assignment's in a cluster,
// the broker epoch on a single broker.
func (p *partition) leaderEpoch() int32 {
	if p.b.cl == nil {
		return p.b.epoch
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// clusterBrokers lists every live broker of the cluster in resp (a single
// broker lists itself, as resp holds already) and returns the view the
// partitions' leaders are read from (nil on a single broker).
func (b *Broker) clusterBrokers(resp *kmsg.MetadataResponse) *cluster.View {
	if b.cl == nil {
		return nil
	}
	v := b.cl.m.View()
	resp.Brokers = resp.Brokers[:0]
	ids := make([]int32, 0, len(v.Nodes))
	for id := range v.Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		host, port, err := splitAddr(v.Nodes[id].Addr)
		if err != nil {
			continue
		}
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: id, Host: host, Port: port})
	}
	return &v
}

// splitAddr splits a HOST:PORT.
func splitAddr(addr string) (string, int32, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: bad port", addr)
	}
	return host, int32(port), nil
}

// Leave hands this broker's partitions and group offsets over to the rest
// of the cluster before it stops (a graceful stop, as Kafka's controlled
// shutdown): it leaves the cluster's live brokers (cluster.Member.Leave),
// so the controller assigns its units to the others, and keeps serving
// while they move: a Produce for a partition that moved is answered
// NOT_LEADER_OR_FOLLOWER naming the new owner (KIP-951), which clients
// follow at once, instead of a closed connection that leaves them to find
// the new owner at their next metadata refresh. It returns once nothing is
// owned here any more (and no client asked for a moved partition for
// handOverQuiet), at once when no other broker is live, or with the
// units still here when ctx ends. A single broker (no cluster) has
// nothing to hand over.
func (b *Broker) Leave(ctx context.Context) (left int, err error) {
	if b.cl == nil {
		return 0, nil
	}
	if err := b.cl.m.Leave(ctx); err != nil {
		return b.ownedUnits(), err
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	var empty time.Time // when nothing was owned here any more
	for {
		n := b.ownedUnits()
		others := 0
		for id := range b.cl.m.View().Nodes {
			if id != b.nodeID {
				others++
			}
		}
		switch {
		case n > 0 && others == 0:
			return n, nil // nobody to hand them to: they wait for a broker to join
		case n > 0:
			empty = time.Time{}
		case empty.IsZero():
			empty = time.Now()
		default:
			// Every unit moved; clients learn it at their next Produce
			// here, so keep answering until none came for a while.
			last := time.Unix(0, b.cl.hinted.Load())
			if time.Since(empty) >= handOverQuiet && time.Since(last) >= handOverQuiet {
				return 0, nil
			}
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-t.C:
		}
	}
}

// handOverQuiet is how long a leaving broker keeps answering after its
// last unit moved and after the last Produce it answered with a new owner:
// longer than a client's retry backoff after an error or two (franz-go
// 250 ms doubling, Java up to 1 s), so that a client backing off from an
// answer given while a partition was still closing comes back to a broker
// that names the new owner, not to a closed port (it would then wait for
// its next metadata refresh).
const handOverQuiet = 2 * time.Second

// ownedUnits is the number of units open here: partitions (open or being
// opened again) and the group offsets.
func (b *Broker) ownedUnits() int {
	n := 0
	for _, t := range b.catalog.list() {
		b.catalog.mu.RLock()
		parts := append([]*partition(nil), t.parts...)
		b.catalog.mu.RUnlock()
		for _, p := range parts {
			p.mu.Lock()
			if p.log != nil || p.reopening {
				n++
			}
			p.mu.Unlock()
		}
	}
	b.cl.mu.Lock()
	if b.cl.offsetsEpoch != 0 {
		n++
	}
	b.cl.mu.Unlock()
	return n
}
