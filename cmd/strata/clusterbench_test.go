//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// partitionAcks produces to every partition of a topic in turn (about
// rate records per second) and keeps when each partition first acked a
// record after the last mark.
type partitionAcks struct {
	cl    *kgo.Client
	since atomic.Int64   // unix nanoseconds of the mark
	first []atomic.Int64 // unix nanoseconds of the first ack after it, per partition
	errs  atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	acks  [][]int64 // unix nanoseconds of every ack per partition
}

func startPartitionAcks(cl *kgo.Client, topic string, partitions, rate int) *partitionAcks {
	a := &partitionAcks{cl: cl, first: make([]atomic.Int64, partitions), stop: make(chan struct{}), acks: make([][]int64, partitions)}
	a.mark(time.Now())
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		const tick = 10 * time.Millisecond
		per := max(1, rate/int(time.Second/tick))
		t := time.NewTicker(tick)
		defer t.Stop()
		for i := 0; ; {
			select {
			case <-a.stop:
				return
			case <-t.C:
			}
			for range per {
				p := int32(i % partitions)
				i++
				a.cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))}, func(r *kgo.Record, err error) {
					if err != nil {
						a.errs.Add(1)
						return
					}
					now := time.Now().UnixNano()
					if now > a.since.Load() {
						a.first[r.Partition].CompareAndSwap(0, now)
					}
					a.mu.Lock()
					a.acks[r.Partition] = append(a.acks[r.Partition], now)
					a.mu.Unlock()
				})
			}
		}
	}()
	return a
}

// mark starts a measurement at since.
func (a *partitionAcks) mark(since time.Time) {
	for i := range a.first {
		a.first[i].Store(0)
	}
	a.since.Store(since.UnixNano())
}

// allAcked returns how long after the mark every partition had acked a
// record, once they all did, and the slowest partition.
func (a *partitionAcks) allAcked() (time.Duration, int, bool) {
	var latest int64
	slowest := -1
	for i := range a.first {
		v := a.first[i].Load()
		if v == 0 {
			return 0, i, false
		}
		if v > latest {
			latest, slowest = v, i
		}
	}
	return time.Duration(latest - a.since.Load()), slowest, true
}

// maxGap is the longest time partition p went without an ack between
// from and to.
func (a *partitionAcks) maxGap(p int, from, to time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	last, gap := from.UnixNano(), int64(0)
	for _, t := range a.acks[p] {
		if t <= last {
			continue
		}
		if t > to.UnixNano() {
			break
		}
		gap, last = max(gap, t-last), t
	}
	return time.Duration(max(gap, to.UnixNano()-last))
}

func (a *partitionAcks) close() {
	close(a.stop)
	a.wg.Wait()
	a.cl.Close()
}

// benchCluster starts three brokers on the etcd testbed with topic of
// partitions spread over all three, and returns them and a client.
// STRATA_BENCH_STREAM_SETS=off runs the brokers with stream sets off, for
// the comparison in docs/operating.md.
func benchCluster(b *testing.B, topic string, partitions int32) (*brokerCluster, *kgo.Client) {
	c := startBrokerCluster(b, etcdTestbed(b), 3)
	admin := c.client()
	b.Cleanup(admin.Close)
	ctx := context.Background()
	createTopic(ctx, b, admin, topic, partitions)
	waitLeaders(ctx, b, admin, topic, 3, func(ls []int32) bool { return count(ls) == 3 })
	return c, admin
}

// reportSpread reports the median and the largest of ds as name_p50_s
// and name_max_s.
func reportSpread(b *testing.B, name string, ds []time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	b.ReportMetric(s[len(s)/2].Seconds(), name+"_p50_s")
	b.ReportMetric(s[len(s)-1].Seconds(), name+"_max_s")
}

// benchProducers starts two producers to every partition of topic, one
// with franz-go's default MetadataMinAge (5s), one with 100ms.
// KGO_LOG_default=FILE (or KGO_LOG_minage_100ms) writes that client's
// debug log to FILE.
func benchProducers(c *brokerCluster, topic string, partitions, rate int) map[string]*partitionAcks {
	producers := map[string]*partitionAcks{}
	for name, opts := range map[string][]kgo.Opt{
		"default":      nil,
		"minage_100ms": {kgo.MetadataMinAge(100 * time.Millisecond)},
	} {
		if f := os.Getenv("KGO_LOG_" + name); f != "" {
			if w, err := os.Create(f); err == nil {
				opts = append(opts, kgo.WithLogger(kgo.BasicLogger(w, kgo.LogLevelDebug, func() string { return time.Now().Format("15:04:05.000 ") })))
			}
		}
		cl := c.client(append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
		producers[name] = startPartitionAcks(cl, topic, partitions, rate)
	}
	return producers
}

func closeProducers(ps map[string]*partitionAcks) {
	for _, p := range ps {
		p.close()
	}
}

// etcdEvents records when a cluster's broker keys are deleted and when
// assignments are written, from an etcd watch.
type etcdEvents struct {
	mu       sync.Mutex
	deleted  map[string]time.Time // broker key -> deletion
	assigned time.Time            // last assignment write
	cli      *clientv3.Client
	cancel   context.CancelFunc
	done     chan struct{}
}

func watchEtcd(t testing.TB, endpoints, prefix string) *etcdEvents {
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &etcdEvents{deleted: map[string]time.Time{}, cli: cli, cancel: cancel, done: make(chan struct{})}
	wc := cli.Watch(ctx, prefix, clientv3.WithPrefix())
	go func() {
		defer close(e.done)
		for wr := range wc {
			now := time.Now()
			e.mu.Lock()
			for _, ev := range wr.Events {
				k := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				switch {
				case strings.HasPrefix(k, "brokers/") && ev.Type == clientv3.EventTypeDelete:
					e.deleted[k] = now
				case strings.HasPrefix(k, "assign/") && ev.Type == clientv3.EventTypePut:
					e.assigned = now
				}
			}
			e.mu.Unlock()
		}
	}()
	return e
}

func (e *etcdEvents) close() {
	e.cancel()
	<-e.done
	_ = e.cli.Close()
}

// ownedSum is the sum of strata_cluster_partitions_owned over brokers.
func (c *brokerCluster) ownedSum(brokers []int) int64 {
	var n int64
	for _, i := range brokers {
		if v := c.metric(i, "strata_cluster_partitions_owned"); v > 0 {
			n += v
		}
	}
	return n
}

// BenchmarkClusterFailover kills one of three brokers with SIGKILL per
// iteration (each in turn, so the controller too), under a producer
// writing to every one of 256 partitions, and reports how long after the
// kill every partition acked records again: with franz-go's default
// MetadataMinAge (5s), and with 100ms. The server's part is reported
// too: the lease expiry (the broker key deleted in etcd), the
// controller's reassignment written, and the survivors owning every
// partition (their strata_cluster_partitions_owned). Run it with
//
//	eval "$(testbed/up etcd)"
//	go test -run '^$' -bench BenchmarkClusterFailover -benchtime 10x ./cmd/strata
func BenchmarkClusterFailover(b *testing.B) {
	const partitions = 256
	ctx := context.Background()
	c, admin := benchCluster(b, "failover", partitions)
	events := watchEtcd(b, c.etcd, "/strata/"+c.name+"/")
	defer events.close()
	producers := benchProducers(c, "failover", partitions, 1000)
	defer closeProducers(producers)
	waitAll := func(within time.Duration) {
		deadline := time.Now().Add(within)
		for {
			ok := true
			for _, p := range producers {
				_, _, done := p.allAcked()
				ok = ok && done
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("not every partition acked within %s", within)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAll(time.Minute)
	var expired, assigned, owned []time.Duration
	acked := map[string][]time.Duration{}
	b.ResetTimer()
	for i := range b.N {
		k := i % 3
		node := nodeOf(ctx, b, admin, c.addrs[k])
		key := "brokers/" + strconv.Itoa(int(node))
		killed := time.Now()
		for _, p := range producers {
			p.mark(killed)
		}
		c.kill(k, syscall.SIGKILL)
		var others []int
		for j := range 3 {
			if j != k {
				others = append(others, j)
			}
		}
		var ownedAt time.Duration
		deadline := time.Now().Add(time.Minute)
		for ownedAt == 0 || !func() bool {
			for _, p := range producers {
				if _, _, ok := p.allAcked(); !ok {
					return false
				}
			}
			return true
		}() {
			if ownedAt == 0 && c.ownedSum(others) == partitions {
				ownedAt = time.Since(killed)
			}
			if time.Now().After(deadline) {
				b.Fatalf("kill %d of broker %d: not failed over within a minute", i+1, k+1)
			}
			time.Sleep(10 * time.Millisecond)
		}
		events.mu.Lock()
		del, asg := events.deleted[key], events.assigned
		delete(events.deleted, key)
		events.mu.Unlock()
		expired = append(expired, del.Sub(killed))
		assigned = append(assigned, asg.Sub(killed))
		owned = append(owned, ownedAt)
		line := fmt.Sprintf("kill %d (broker %d, node %d): lease expired %s, reassigned %s, owned %s", i+1, k+1, node,
			del.Sub(killed).Round(time.Millisecond), asg.Sub(killed).Round(time.Millisecond), ownedAt.Round(time.Millisecond))
		for name, p := range producers {
			d, slowest, _ := p.allAcked()
			acked[name] = append(acked[name], d)
			line += fmt.Sprintf(", acked (%s) %s (last partition %d)", name, d.Round(time.Millisecond), slowest)
		}
		b.Log(line)
		b.StopTimer()
		c.start(k)
		waitLeaders(ctx, b, admin, "failover", 3, func(ls []int32) bool { return count(ls) == 3 })
		for _, p := range producers {
			p.mark(time.Now())
		}
		waitAll(time.Minute)
		b.StartTimer()
	}
	b.StopTimer()
	reportSpread(b, "expired", expired)
	reportSpread(b, "reassigned", assigned)
	reportSpread(b, "owned", owned)
	for name, ds := range acked {
		reportSpread(b, "acked_"+name, ds)
	}
	for name, p := range producers {
		if n := p.errs.Load(); n > 0 {
			b.Errorf("producer %s: %d records failed", name, n)
		}
	}
}

// BenchmarkClusterGracefulMove stops the third of three brokers with
// SIGTERM (its partitions move to the other two) and starts it again (a
// share moves back to it) once per iteration, under producers writing to
// every one of 24 partitions about 50 times a second each, and reports
// the longest time a moved partition went without an ack, over the moved
// partitions (p50 and max), on leave and on join: with franz-go's default
// MetadataMinAge (5s) and with 100ms. Run it with
//
//	eval "$(testbed/up etcd)"
//	go test -run '^$' -bench BenchmarkClusterGracefulMove -benchtime 5x ./cmd/strata
func BenchmarkClusterGracefulMove(b *testing.B) {
	const partitions = 24
	ctx := context.Background()
	c, admin := benchCluster(b, "moves", partitions)
	producers := benchProducers(c, "moves", partitions, 1200)
	defer closeProducers(producers)
	time.Sleep(2 * time.Second)
	gaps := map[string][]time.Duration{}
	move := func(what string, from, brokers int, act func()) {
		before := waitLeaders(ctx, b, admin, "moves", from, func(ls []int32) bool { return count(ls) == from })
		began := time.Now()
		act()
		after := waitLeaders(ctx, b, admin, "moves", brokers, func(ls []int32) bool { return count(ls) == brokers })
		time.Sleep(time.Second)
		end := time.Now()
		line := fmt.Sprintf("%s: %d brokers", what, brokers)
		for name, p := range producers {
			var worst time.Duration
			worstAt := -1
			moved := 0
			for i := range partitions {
				if before[i] == after[i] {
					continue
				}
				moved++
				g := p.maxGap(i, began, end)
				gaps[what+"_"+name] = append(gaps[what+"_"+name], g)
				if g > worst {
					worst, worstAt = g, i
				}
			}
			line += fmt.Sprintf(", %s: %d moved, longest gap %s (partition %d)", name, moved, worst.Round(time.Millisecond), worstAt)
		}
		var fences int64
		for i := range c.procs {
			fences += max(0, c.metric(i, "strata_cluster_partition_fences_total"))
		}
		b.Log(line + fmt.Sprintf("; partitions fenced so far: %d", fences))
	}
	b.ResetTimer()
	for range b.N {
		move("leave", 3, 2, func() { c.kill(2, syscall.SIGTERM) })
		move("join", 2, 3, func() { c.start(2) })
	}
	b.StopTimer()
	for name, ds := range gaps {
		reportSpread(b, name+"_gap", ds)
	}
	for name, p := range producers {
		if n := p.errs.Load(); n > 0 {
			b.Errorf("producer %s: %d records failed", name, n)
		}
	}
}

// etcdRequests sums grpc_server_msg_received_total (every request message
// clients sent: unary calls and stream messages such as lease keepalives
// and watch requests) over the etcd members at endpoints, by method.
func etcdRequests(b *testing.B, endpoints string) map[string]float64 {
	out := map[string]float64{}
	for _, e := range strings.Split(endpoints, ",") {
		resp, err := http.Get("http://" + e + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			rest, ok := strings.CutPrefix(line, "grpc_server_msg_received_total{")
			if !ok {
				continue
			}
			labels, val, _ := strings.Cut(rest, "} ")
			_, method, _ := strings.Cut(labels, `grpc_method="`)
			method, _, _ = strings.Cut(method, `"`)
			v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err == nil {
				out[method] += v
			}
		}
	}
	return out
}

// BenchmarkClusterEtcdOverhead runs three brokers with a topic of 1,000
// partitions and reports the requests per second the etcd members receive
// in steady state (grpc_server_msg_received_total of every member, by
// method) with no produce and with a producer writing 2,000 records a
// second over every partition: what the cluster costs etcd does not grow
// with the produce rate. Run it alone on its etcd testbed (other clients
// of the testbed count too):
//
//	eval "$(testbed/up etcd)"
//	go test -run '^$' -bench BenchmarkClusterEtcdOverhead -benchtime 1x ./cmd/strata
func BenchmarkClusterEtcdOverhead(b *testing.B) {
	const partitions = 1000
	window := 30 * time.Second
	c, _ := benchCluster(b, "overhead", partitions)
	for range b.N {
		for _, rate := range []int{0, 2000} {
			var p *partitionAcks
			if rate > 0 {
				p = startPartitionAcks(c.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), "overhead", partitions, rate)
			}
			time.Sleep(5 * time.Second)
			before := etcdRequests(b, c.etcd)
			began := time.Now()
			time.Sleep(window)
			after := etcdRequests(b, c.etcd)
			secs := time.Since(began).Seconds()
			var total float64
			var by []string
			for m, v := range after {
				if d := (v - before[m]) / secs; d > 0 {
					total += d
					by = append(by, fmt.Sprintf("%s %.2f/s", m, d))
				}
			}
			slices.Sort(by)
			b.Logf("produce %d records/s: etcd received %.2f requests/s (%s)", rate, total, strings.Join(by, ", "))
			b.ReportMetric(total, fmt.Sprintf("etcd_req/s_at_%d_rec/s", rate))
			if p != nil {
				if n := p.errs.Load(); n > 0 {
					b.Errorf("%d records failed", n)
				}
				p.close()
			}
		}
	}
}
