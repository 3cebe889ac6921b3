//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/internal/testbed"
)

// etcdTestbed returns the endpoints of the shared etcd testbed.
func etcdTestbed(t *testing.T) string {
	t.Helper()
	testbed.SkipShort(t, "the etcd testbed and minutes of load")
	env, err := testbed.Env("etcd", "STRATA_ETCD_ENDPOINTS")
	if err != nil {
		t.Fatal(err)
	}
	return env["STRATA_ETCD_ENDPOINTS"]
}

// brokerCluster is three `strata serve --etcd` processes on one data
// directory.
type brokerCluster struct {
	t       *testing.T
	bin     string
	etcd    string
	name    string
	data    string
	addrs   []string
	procs   []*serveProc
	envEtcd []string // per broker: the etcd endpoints it is given (default etcd)
}

func startBrokerCluster(t *testing.T, etcd string, n int) *brokerCluster {
	t.Helper()
	dir := t.TempDir()
	c := &brokerCluster{t: t, bin: buildBinary(t, dir, "strata", "."), etcd: etcd,
		name: fmt.Sprintf("c%d-%s", os.Getpid(), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))),
		data: filepath.Join(dir, "data")}
	for i := 0; i < n; i++ {
		c.addrs = append(c.addrs, freePort(t))
		c.envEtcd = append(c.envEtcd, etcd)
		c.procs = append(c.procs, nil)
	}
	for i := range n {
		c.start(i)
	}
	return c
}

// start starts broker i (again) on its address.
func (c *brokerCluster) start(i int) {
	c.t.Helper()
	c.procs[i] = startServe(c.t, c.bin, "--etcd", c.envEtcd[i], "--cluster", c.name, "--data", c.data, "--listen", c.addrs[i])
}

// kill sends sig to broker i and waits for it to exit.
func (c *brokerCluster) kill(i int, sig syscall.Signal) {
	c.t.Helper()
	if err := c.procs[i].cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
	_ = c.procs[i].wait()
}

// client is a kgo client seeded with every broker.
func (c *brokerCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs...), kgo.RecordRetries(1 << 30),
		kgo.RecordDeliveryTimeout(2 * time.Minute), kgo.RetryTimeout(2 * time.Minute), kgo.ProducerLinger(time.Millisecond)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// leaders returns the leader of each partition of topic as Metadata
// through cl says (-1: none).
func leaders(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) ([]int32, int) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 {
		return nil, 0
	}
	var out []int32
	for _, p := range resp.Topics[0].Partitions {
		out = append(out, p.Leader)
	}
	return out, len(resp.Brokers)
}

// groupConsumers are members of one consumer group recording what they
// consumed.
type groupConsumers struct {
	mu      sync.Mutex
	seen    map[string]int // value -> times consumed
	clients []*kgo.Client
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

func startGroup(c *brokerCluster, group, topic string, members int) *groupConsumers {
	ctx, cancel := context.WithCancel(context.Background())
	g := &groupConsumers{seen: map[string]int{}, cancel: cancel}
	for range members {
		cl := c.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.AutoCommitInterval(200*time.Millisecond))
		g.clients = append(g.clients, cl)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
					g.mu.Lock()
					g.seen[string(r.Value)]++
					g.mu.Unlock()
				})
			}
		}()
	}
	return g
}

// waitFor waits until every record of acked was consumed by the group.
func (g *groupConsumers) waitFor(t *testing.T, acked map[string]int32) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		g.mu.Lock()
		missing := 0
		var one string
		for v := range acked {
			if g.seen[v] == 0 {
				missing++
				one = v
			}
		}
		dups := 0
		for _, n := range g.seen {
			if n > 1 {
				dups++
			}
		}
		g.mu.Unlock()
		if missing == 0 {
			t.Logf("the consumer group consumed all %d acked records (%d consumed again after a rebalance: at-least-once delivery to the group)", len(acked), dups)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer group misses %d acked records (e.g. %s)", missing, one)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (g *groupConsumers) close() {
	g.cancel()
	g.wg.Wait()
	for _, cl := range g.clients {
		cl.Close()
	}
}

// TestClusterKill9 runs three brokers on etcd under an idempotent acks=all
// producer and a three-member consumer group, kills one broker with
// SIGKILL and restarts it: the producer resumes on the other brokers,
// every acked record is in the log exactly once and in order per
// partition, and the group consumes every one of them.
func TestClusterKill9(t *testing.T) {
	c, cl, g, pr := loadedCluster(t, "orders", 2000)
	ctx := context.Background()
	killed := time.Now()
	c.kill(1, syscall.SIGKILL)
	before := pr.n()
	t.Logf("killed broker 2 (SIGKILL) with %d records acked", before)
	pr.waitEveryPartition(t, 6)
	t.Logf("failover: every partition acked records again %s after the kill (lease TTL 2s)", time.Since(killed).Round(time.Millisecond))
	ls := waitLeaders(ctx, t, cl, "orders", 2, nil)
	t.Logf("leaders after the kill: %v", ls)

	c.start(1)
	mid := pr.n()
	waitLeaders(ctx, t, cl, "orders", 3, func(ls []int32) bool { return count(ls) == 3 })
	pr.wait(t, mid+2000)
	acked := pr.finish(ctx, t, cl)
	t.Logf("%d records acked in all", len(acked))
	consumeAcked(ctx, t, c.addrs[0], "orders", acked)
	g.waitFor(t, acked)
}

// TestClusterRollingRestart restarts the three brokers one after the
// other (SIGTERM, then start again) under the same load.
func TestClusterRollingRestart(t *testing.T) {
	c, cl, g, pr := loadedCluster(t, "rolling", 1000)
	ctx := context.Background()
	for i := range c.addrs {
		began := time.Now()
		c.kill(i, syscall.SIGTERM)
		c.start(i)
		waitLeaders(ctx, t, cl, "rolling", 3, func(ls []int32) bool { return count(ls) == 3 })
		n := pr.n()
		pr.wait(t, n+1000)
		t.Logf("broker %d restarted; 1000 more records acked %s after its stop", i+1, time.Since(began).Round(time.Millisecond))
	}
	acked := pr.finish(ctx, t, cl)
	consumeAcked(ctx, t, c.addrs[2], "rolling", acked)
	g.waitFor(t, acked)
}

// count is the number of distinct leaders in ls.
func count(ls []int32) int {
	m := map[int32]bool{}
	for _, l := range ls {
		m[l] = true
	}
	return len(m)
}

// waitLeaders waits until Metadata lists brokers live brokers and a
// leader for every partition of topic (and ok holds, when set).
func waitLeaders(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, brokers int, ok func([]int32) bool) []int32 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ls, nb := leaders(ctx, t, cl, topic)
		good := nb == brokers && len(ls) > 0
		for _, l := range ls {
			good = good && l >= 0
		}
		if good && (ok == nil || ok(ls)) {
			return ls
		}
		if time.Now().After(deadline) {
			t.Fatalf("metadata of %s: leaders %v with %d brokers, want a leader each with %d brokers", topic, ls, nb, brokers)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitEveryPartition waits until each of n partitions acked a record
// after the call.
func (p *ackedProducer) waitEveryPartition(t *testing.T, n int) {
	t.Helper()
	counts := func() map[int32]int {
		p.mu.Lock()
		defer p.mu.Unlock()
		m := map[int32]int{}
		for _, part := range p.acked {
			m[part]++
		}
		return m
	}
	start := counts()
	deadline := time.Now().Add(time.Minute)
	for {
		now, done := counts(), 0
		for i := int32(0); i < int32(n); i++ {
			if now[i] > start[i] {
				done++
			}
		}
		if done == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d partitions acked records within a minute: %v -> %v", done, n, start, now)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// loadedCluster starts three brokers on the etcd testbed, creates topic
// with 6 partitions, and starts a three-member consumer group and an
// idempotent producer, returning once it had first records acked.
func loadedCluster(t *testing.T, topic string, first int) (*brokerCluster, *kgo.Client, *groupConsumers, *ackedProducer) {
	t.Helper()
	c := startBrokerCluster(t, etcdTestbed(t), 3)
	ctx := context.Background()
	cl := c.client()
	t.Cleanup(cl.Close)
	createTopic(ctx, t, cl, topic, 6)
	waitLeaders(ctx, t, cl, topic, 3, nil)
	g := startGroup(c, "g", topic, 3)
	t.Cleanup(g.close)
	pr := startProducer(ctx, cl, topic, 12)
	pr.wait(t, first)
	return c, cl, g, pr
}
