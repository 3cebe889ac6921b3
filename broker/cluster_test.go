package broker

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/internal/cluster"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// clusterSeq numbers the clusters of this test binary (-count reruns).
var clusterSeq atomic.Int64

// startClusterBrokers starts n in-process brokers of one cluster on one
// nfs directory, coordinated through the etcd testbed, and returns their
// addresses.
func startClusterBrokers(t *testing.T, n int) []string {
	addrs, _, _, _ := startClusterOn(t, n)
	return addrs
}

// startClusterOn is startClusterBrokers that also returns the brokers, the
// cluster name and a store of its own on the brokers' directory.
func startClusterOn(t *testing.T, n int) ([]string, []*Broker, string, *stream.Store) {
	t.Helper()
	testbed.SkipShort(t, "the etcd testbed")
	env, err := testbed.Env("etcd", "STRATA_ETCD_ENDPOINTS")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	name := testClusterName(t)
	var addrs []string
	var brokers []*Broker
	for range n {
		b, _, addr := joinClusterBroker(t, strings.Split(env["STRATA_ETCD_ENDPOINTS"], ","), name, dir, nil)
		addrs = append(addrs, addr)
		brokers = append(brokers, b)
	}
	return addrs, brokers, name, nfsStore(t, dir)
}

// testClusterName is a cluster name of the test's own.
func testClusterName(t *testing.T) string {
	return fmt.Sprintf("bc%d-%d-%s", os.Getpid(), clusterSeq.Add(1), strings.ToLower(t.Name()))
}

// joinClusterBroker starts an in-process broker of cluster name on a store
// of its own on the nfs directory dir, coordinated through etcd at
// endpoints (mod changes its config), and returns it, its member and its
// address; both are closed when the test ends.
func joinClusterBroker(t *testing.T, endpoints []string, name, dir string, mod func(*Config)) (*Broker, *cluster.Member, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cluster.Join(context.Background(), cluster.Config{
		Endpoints: endpoints, Cluster: name, Storage: "nfs:" + dir,
		Name: ln.Addr().String(), Addr: ln.Addr().String(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Cluster: name, Store: nfsStore(t, dir), Advertise: ln.Addr().String(),
		Logger: testLogger(t), AutoCreateTopics: true, DefaultPartitions: 6, Membership: m}
	if mod != nil {
		mod(&cfg)
	}
	b, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.Serve(ln) }()
	t.Cleanup(func() { _ = b.Close(); _ = m.Close() })
	return b, m, ln.Addr().String()
}

// waitSpread waits until Metadata from every seed broker of cl gives
// every partition of topic a leader, uses every one of brokers and names
// the same leader at the same epoch for each partition (a broker's view of
// the cluster lags the etcd writes by its watch), and returns that answer.
func waitSpread(t *testing.T, cl *kgo.Client, topic string, partitions, brokers int) *kmsg.MetadataResponse {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var first *kmsg.MetadataResponse
		var last string
		agree := true
		for _, sb := range cl.SeedBrokers() {
			resp, err := metadataOf(sb, topic)
			if err != nil {
				agree, last = false, err.Error()
				break
			}
			if reason := spreadOf(resp, partitions, brokers); reason != "" {
				agree, last = false, reason
				break
			}
			if first == nil {
				first = resp
			} else if !sameLeaders(first, resp) {
				agree, last = false, "the brokers name different leaders"
				break
			}
		}
		if agree && first != nil {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: not spread over %d brokers with %d partitions within 30s: %s", topic, brokers, partitions, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// spreadOf says why resp does not give each of partitions a leader on
// brokers distinct brokers in all ("" when it does).
func spreadOf(resp *kmsg.MetadataResponse, partitions, brokers int) string {
	if len(resp.Topics) != 1 {
		return fmt.Sprintf("%d topics in the answer", len(resp.Topics))
	}
	leaders := map[int32]bool{}
	for _, p := range resp.Topics[0].Partitions {
		if p.Leader < 0 {
			return fmt.Sprintf("partition %d has no leader", p.Partition)
		}
		leaders[p.Leader] = true
	}
	if n := len(resp.Topics[0].Partitions); n != partitions || len(leaders) != brokers {
		return fmt.Sprintf("%d partitions on leaders %v", n, leaders)
	}
	return ""
}

// sameLeaders reports whether a and b name the same leader at the same
// epoch for every partition of their one topic.
func sameLeaders(a, b *kmsg.MetadataResponse) bool {
	pa, pb := a.Topics[0].Partitions, b.Topics[0].Partitions
	if len(pa) != len(pb) {
		return false
	}
	at := map[int32][2]int32{}
	for _, p := range pa {
		at[p.Partition] = [2]int32{p.Leader, p.LeaderEpoch}
	}
	for _, p := range pb {
		if at[p.Partition] != [2]int32{p.Leader, p.LeaderEpoch} {
			return false
		}
	}
	return true
}

// TestKcatCluster lists three brokers of a cluster with kcat (-L), produces
// through one and consumes through another, plainly and as a group.
func TestKcatCluster(t *testing.T) {
	requireTool(t, "kcat", "apt-get install -y kcat")
	addrs := startClusterBrokers(t, 3)
	cl := newClient(t, addrs[0], kgo.SeedBrokers(addrs...))
	createTopic(t, cl, "kc", 6, nil)
	waitSpread(t, cl, "kc", 6, 3)
	meta := kcat(t, "", "-b", addrs[0], "-L", "-t", "kc")
	if !strings.Contains(meta, " 3 brokers:") || !strings.Contains(meta, "with 6 partitions") {
		t.Fatalf("kcat -L:\n%s", meta)
	}
	const n = 600
	var in strings.Builder
	var want []string
	for i := range n {
		fmt.Fprintf(&in, "k%d:value-%06d\n", i, i)
		want = append(want, fmt.Sprintf("value-%06d", i))
	}
	kcat(t, in.String(), "-b", addrs[1], "-P", "-t", "kc", "-K", ":", "-X", "acks=all")
	got := strings.Split(strings.TrimSpace(kcat(t, "", "-b", addrs[2], "-C", "-t", "kc", "-e", "-q", "-f", "%s\n")), "\n")
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("kcat consumed %d records through another broker, want the %d produced", len(got), n)
	}
	group := kcat(t, "", "-b", addrs[0], "-G", "kcg", "kc", "-e", "-q", "-f", "%s\n", "-X", "auto.offset.reset=earliest")
	if g := strings.Count(group, "value-"); g != n {
		t.Fatalf("kcat -G consumed %d records, want %d", g, n)
	}
}

// TestJavaClientCluster runs the Java client's producer (idempotent,
// acks=all) and consumer group against three brokers of a cluster.
func TestJavaClientCluster(t *testing.T) {
	java := javaClient(t)
	addrs := startClusterBrokers(t, 3)
	cl := newClient(t, addrs[0], kgo.SeedBrokers(addrs...))
	createTopic(t, cl, "javac", 6, nil)
	waitSpread(t, cl, "javac", 6, 3)
	const n = 2000
	out := java("StrataClientCheck", strings.Join(addrs, ","), "javac", fmt.Sprint(n), "javac-group")
	checkJavaConsumed(t, out, n)
	if total := committedSum(t, cl, "javac-group"); total != n {
		t.Fatalf("javac-group committed offsets sum to %d, want %d", total, n)
	}
}

// metadataOf asks for topic's metadata through cl.
func metadataOf(cl kmsg.Requestor, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	return req.RequestWith(context.Background(), cl)
}

// TestClusterTopicsOnAnyBroker creates a topic through each broker of a
// cluster at once (one succeeds, the others get TOPIC_ALREADY_EXISTS),
// grows it through another and deletes it through a third; every broker's
// Metadata follows.
func TestClusterTopicsOnAnyBroker(t *testing.T) {
	addrs, _, name, st := startClusterOn(t, 3)
	var cls []*kgo.Client
	for _, a := range addrs {
		cls = append(cls, newClient(t, a))
	}
	codes := make(chan int16, len(cls))
	for _, cl := range cls {
		go func() {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "anyb", 3, -1
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(context.Background(), cl.SeedBrokers()[0])
			if err != nil {
				codes <- -100
				return
			}
			codes <- resp.Topics[0].ErrorCode
		}()
	}
	var ok, exists int
	for range cls {
		switch c := <-codes; c {
		case 0:
			ok++
		case kerr.TopicAlreadyExists.Code:
			exists++
		default:
			t.Fatalf("CreateTopics answered %d", c)
		}
	}
	if ok != 1 || exists != 2 {
		t.Fatalf("three CreateTopics at once: %d created, %d TOPIC_ALREADY_EXISTS; want 1 and 2", ok, exists)
	}
	// A broker learns of a topic created through another from its etcd
	// watch; until then it answers UNKNOWN_TOPIC_OR_PARTITION, which
	// clients retry.
	waitSpread(t, cls[1], "anyb", 3, 3)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "anyb", 6
	cp.Topics = append(cp.Topics, cpt)
	if resp, err := cp.RequestWith(context.Background(), cls[1].SeedBrokers()[0]); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions through broker 2: %v %+v", err, resp)
	}
	for _, cl := range cls {
		waitSpread(t, cl, "anyb", 6, 3)
	}
	// Each owner opens its partitions: 6 partitions, 2 streams each.
	// Metadata names an owner from its assignment on, before its open, so
	// the streams appear shortly after.
	topicStreams := func() []string {
		all, err := st.List(context.Background(), name+"/t/")
		if err != nil {
			t.Fatal(err)
		}
		return all
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		got := topicStreams()
		if len(got) == 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d partition streams on the storage, want 12: %v", len(got), got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"anyb"}
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("anyb")
	dt.Topics = append(dt.Topics, dtt)
	if resp, err := dt.RequestWith(context.Background(), cls[2].SeedBrokers()[0]); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics through broker 3: %v %+v", err, resp)
	}
	for i, cl := range cls {
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := metadataOf(cl, "anyb")
			if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == kerr.UnknownTopicOrPartition.Code {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %d still lists the deleted topic", i+1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The owners closed the partitions; nothing wrote them back.
	time.Sleep(time.Second)
	if got := topicStreams(); len(got) != 0 {
		t.Fatalf("partition streams left on the storage after DeleteTopics: %v", got)
	}
}

// TestClusterProduceNamesLeader sends a Produce for a partition to a
// broker of the cluster that does not own it: the answer is
// NOT_LEADER_OR_FOLLOWER naming the owner and its leader epoch, with the
// owner's address (KIP-951), so that a client moves to it without waiting
// for a metadata refresh.
func TestClusterProduceNamesLeader(t *testing.T) {
	_, _, meta := spreadTopic(t, "hint")
	addrOf := map[int32]string{}
	for _, b := range meta.Brokers {
		addrOf[b.NodeID] = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
	}
	for _, mp := range meta.Topics[0].Partitions {
		// Ask the broker that does not lead mp.
		var other string
		for id, a := range addrOf {
			if id != mp.Leader {
				other = a
			}
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 11, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "hint"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = mp.Partition, []byte{0}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), newClient(t, other).SeedBrokers()[0])
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("partition %d through %s (not its leader): error %d, want NOT_LEADER_OR_FOLLOWER", mp.Partition, other, got.ErrorCode)
		}
		if got.CurrentLeader.LeaderID != mp.Leader || got.CurrentLeader.LeaderEpoch != mp.LeaderEpoch {
			t.Fatalf("partition %d: current leader %d at epoch %d in the answer, want %d at %d (from Metadata)",
				mp.Partition, got.CurrentLeader.LeaderID, got.CurrentLeader.LeaderEpoch, mp.Leader, mp.LeaderEpoch)
		}
		var named string
		for _, b := range resp.Brokers {
			if b.NodeID == mp.Leader {
				named = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
			}
		}
		if named != addrOf[mp.Leader] {
			t.Fatalf("partition %d: the answer lists the leader at %q, want %s (brokers %+v)", mp.Partition, named, addrOf[mp.Leader], resp.Brokers)
		}
	}
}

// TestClusterProduceWaitsForOpen takes a partition's log away from its
// owner as a move to it would find it (assigned here, not open yet; the
// broker opens it at its next look at the cluster, within a second):
// Metadata names the owner meanwhile, and a Produce sent to it waits for
// the open and is acked, instead of NOT_LEADER_OR_FOLLOWER and a client's
// metadata refresh.
func TestClusterProduceWaitsForOpen(t *testing.T) {
	_, p, addr, _ := closedOwnedPartition(t, "opening")
	direct := newClient(t, addr)
	resp := produceOne(t, direct, "opening", p.index)
	if got := resp.Topics[0].Partitions[0]; got.ErrorCode != 0 {
		t.Fatalf("Produce to partition %d while its owner opens it: error %d (%s), want it acked after the open",
			p.index, got.ErrorCode, kerr.ErrorForCode(got.ErrorCode))
	}
}

// TestClusterProduceOpenPastWaitNamesOwner: a Produce for a partition
// whose open here takes longer than openWait is answered
// NOT_LEADER_OR_FOLLOWER naming this broker, its owner, with the leader
// epoch Metadata gives and its address (KIP-951): franz-go retries such an
// answer here after its backoff. Without the hint, a client that does not
// refresh metadata (TestClusterGracefulLeaveHandsOver's) stopped producing
// to the partition.
func TestClusterProduceOpenPastWaitNamesOwner(t *testing.T) {
	w := openWait
	t.Cleanup(func() { openWait = w }) // after the brokers stop
	openWait = time.Nanosecond
	b, p, addr, leader := closedOwnedPartition(t, "slowopen")
	direct := newClient(t, addr)
	// The broker reopens p within a second; an answer that came after the
	// open (acked) says nothing, so close it again and ask again.
	for try := 0; ; try++ {
		resp := produceOne(t, direct, "slowopen", p.index)
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode == 0 && try < 20 {
			_ = p.closeLog()
			continue
		}
		if got.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("Produce to partition %d while its owner opens it past openWait: error %d, want NOT_LEADER_OR_FOLLOWER", p.index, got.ErrorCode)
		}
		if got.CurrentLeader.LeaderID != b.nodeID || got.CurrentLeader.LeaderEpoch != leader.LeaderEpoch {
			t.Fatalf("answer names leader %d at epoch %d, want this broker, %d, at %d (from Metadata)",
				got.CurrentLeader.LeaderID, got.CurrentLeader.LeaderEpoch, b.nodeID, leader.LeaderEpoch)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != b.nodeID {
			t.Fatalf("answer lists brokers %+v, want this broker, %d", resp.Brokers, b.nodeID)
		}
		break
	}
	// A franz-go producer that never refreshes its metadata retries such
	// an answer here and is acked once the open is done.
	pr := newClient(t, addr, kgo.MetadataMinAge(time.Hour), kgo.MetadataMaxAge(time.Hour),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, v := range []string{"first", "after a close"} {
		if v != "first" {
			_ = p.closeLog()
		}
		acked := make(chan error, 1)
		rec := &kgo.Record{Topic: "slowopen", Partition: p.index, Value: []byte(v)}
		pr.Produce(context.Background(), rec, func(_ *kgo.Record, err error) { acked <- err })
		select {
		case err := <-acked:
			if err != nil {
				t.Fatalf("a producer without metadata refreshes, record %q to partition %d while its owner opens it past openWait: %v", v, p.index, err)
			}
		case <-time.After(30 * time.Second):
			// An idempotent producer does not give the record up: do
			// not wait for it at the client's Close either.
			pr.PurgeTopicsFromClient("slowopen")
			t.Fatalf("a producer without metadata refreshes, record %q to partition %d while its owner opens it past openWait: not acked within 30 s", v, p.index)
		}
	}
}

// closedOwnedPartition starts two brokers with topic (4 partitions), waits
// for a partition of broker 1 to be open and closes its log, as a move to
// broker 1 would find it. It returns broker 1, the partition, broker 1's
// address and the partition's Metadata, which names broker 1.
func closedOwnedPartition(t *testing.T, topic string) (*Broker, *partition, string, kmsg.MetadataResponseTopicPartition) {
	t.Helper()
	addrs, brokers, _ := spreadTopic(t, topic)
	b := brokers[0]
	// Metadata names an owner from its assignment on, before its open is
	// done: wait for one of broker 1's partitions to be open.
	var p *partition
	for deadline := time.Now().Add(10 * time.Second); p == nil; time.Sleep(10 * time.Millisecond) {
		for i := int32(0); i < 4 && p == nil; i++ {
			q, _ := b.catalog.partitionOf(topic, i)
			if l, _ := q.current(); l != nil {
				p = q
			}
		}
		if p == nil && time.Now().After(deadline) {
			t.Fatal("broker 1 has no partition of the topic open within 10s")
		}
	}
	_ = p.closeLog()
	direct := newClient(t, addrs[0])
	meta, err := metadataOf(direct, topic)
	if err != nil {
		t.Fatal(err)
	}
	mp := meta.Topics[0].Partitions[p.index]
	if mp.Leader != b.nodeID {
		t.Fatalf("partition %d assigned to node %d and being opened: Metadata names leader %d", p.index, b.nodeID, mp.Leader)
	}
	return b, p, addrs[0], mp
}

// spreadTopic starts two brokers, creates topic with 4 partitions, waits
// until both lead some, and returns their addresses, the brokers and the
// topic's Metadata.
func spreadTopic(t *testing.T, topic string) ([]string, []*Broker, *kmsg.MetadataResponse) {
	t.Helper()
	addrs, brokers, _, _ := startClusterOn(t, 2)
	cl := newClient(t, addrs[0], kgo.SeedBrokers(addrs...))
	createTopic(t, cl, topic, 4, nil)
	return addrs, brokers, waitSpread(t, cl, topic, 4, 2)
}

// produceOne sends a Produce (v11, acks all) of one batch to partition of
// topic through cl's first broker.
func produceOne(t *testing.T, cl *kgo.Client, topic string, partition int32) *kmsg.ProduceResponse {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, sharedlogtest.Build(sharedlogtest.BatchSpec{Tag: topic})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl.SeedBrokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestClusterProduceFailedHereNamesOwner: a Produce for a partition that
// failed on this broker (its log being reopened after a failed write, as
// an append cut short by a hand-over leaves it) and that the cluster has
// assigned to another broker is answered NOT_LEADER_OR_FOLLOWER naming the
// owner, not KAFKA_STORAGE_ERROR with no owner, which a client that does
// not refresh its metadata retried here until this broker exited.
func TestClusterProduceFailedHereNamesOwner(t *testing.T) {
	addrs, brokers, meta := spreadTopic(t, "failedhere")
	var mp kmsg.MetadataResponseTopicPartition
	for _, m := range meta.Topics[0].Partitions {
		if m.Leader == brokers[0].nodeID {
			mp = m
		}
	}
	// Broker 2 does not own mp: mark its copy failed and being reopened
	// (once its catalog has the topic and its view of the cluster names
	// mp's owner, both of which it learns from the cluster, the owner
	// last: a broker that cannot name the owner answers without a hint).
	var q *partition
	knows := func() bool {
		if q, _ = brokers[1].catalog.partitionOf("failedhere", mp.Partition); q == nil {
			return false
		}
		o, ok := brokers[1].cl.m.View().Owners[unitOf(q)]
		return ok && o.Node == mp.Leader && o.Epoch == mp.LeaderEpoch
	}
	for deadline := time.Now().Add(10 * time.Second); !knows(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("broker 2 does not know partition %d of the topic and its owner, broker %d at epoch %d, within 10 s", mp.Partition, mp.Leader, mp.LeaderEpoch)
		}
	}
	q.mu.Lock()
	q.reopening = true
	q.mu.Unlock()
	t.Cleanup(func() {
		q.mu.Lock()
		q.reopening = false
		q.mu.Unlock()
	})
	resp := produceOne(t, newClient(t, addrs[1]), "failedhere", mp.Partition)
	got := resp.Topics[0].Partitions[0]
	if got.ErrorCode != kerr.NotLeaderForPartition.Code || got.CurrentLeader.LeaderID != mp.Leader || got.CurrentLeader.LeaderEpoch != mp.LeaderEpoch {
		t.Fatalf("partition %d failed on broker 2, owned by broker 1: error %d naming %d at epoch %d; want NOT_LEADER_OR_FOLLOWER naming %d at %d",
			mp.Partition, got.ErrorCode, got.CurrentLeader.LeaderID, got.CurrentLeader.LeaderEpoch, mp.Leader, mp.LeaderEpoch)
	}
}
