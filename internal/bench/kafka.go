package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// prepareKafka creates a fresh topic of c.Streams partitions on the
// brokers c.Brokers and returns the produce-consume workload on it: one
// kgo producer (acks=all, idempotent, linger c.Linger, c.Inflight records
// buffered, no compression, kgo's default batch limit, within Kafka's
// default message.max.bytes) producing records of c.BatchBytes random
// bytes stamped with their send time, round robin over the first c.ActivePartitions partitions
// (all by default), c.Rate records a second in all (0: unpaced), and one
// kgo consumer reading the topic from the start.
// Series: produce (Produce call to ack) and e2e (Produce call to the
// consumer's poll returning the record). The topic is deleted at cleanup.
func prepareKafka(ctx context.Context, c Config) (*workload, error) {
	seeds := strings.Split(c.Brokers, ",")
	topic := "strata-bench-" + runID()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", c.Brokers, err)
	}
	var bf *BrokerFigures
	if c.BrokerPID != 0 {
		bf = &BrokerFigures{}
		if bf.RSSBefore, err = rss(c.BrokerPID); err != nil {
			admin.Close()
			return nil, fmt.Errorf("broker pid: %w", err)
		}
	}
	created := time.Now()
	if err := createTopic(ctx, admin, topic, int32(c.Streams)); err != nil {
		admin.Close()
		return nil, err
	}
	if err := waitLeaders(ctx, admin, topic, c.Streams); err != nil {
		admin.Close()
		return nil, err
	}
	if bf != nil {
		bf.CreateSeconds = time.Since(created).Seconds()
		bf.RSSCreated, _ = rss(c.BrokerPID)
		bf.PerPartition = (bf.RSSCreated - bf.RSSBefore) / int64(c.Streams)
	}
	active := c.ActivePartitions
	if active == 0 {
		active = c.Streams
	}
	w := &workload{series: []string{"produce", "e2e"}, broker: bf, client: &clientCounter{}}
	w.cleanup = func(ctx context.Context) {
		if c.KeepTopic {
			admin.Close()
			return
		}
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TopicNames = []string{topic}
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 30000
		_, _ = req.RequestWith(ctx, admin)
		admin.Close()
	}
	w.run = func(ctx context.Context, m *meter, stop <-chan struct{}) error {
		prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(c.Linger),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MaxBufferedRecords(c.Inflight), kgo.WithHooks(w.client))
		if err != nil {
			return fmt.Errorf("kafka producer for %s: %w", c.Brokers, err)
		}
		defer prod.Close()
		pollCtx, cancelPoll := context.WithCancel(ctx)
		defer cancelPoll()
		var mu sync.Mutex
		var first error
		fail := func(err error) {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
		consumed := make(chan error, 1)
		if c.NoConsume {
			consumed <- nil
		} else {
			cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.WithHooks(w.client))
			if err != nil {
				return fmt.Errorf("kafka consumer for %s: %w", c.Brokers, err)
			}
			defer cons.Close()
			go consume(pollCtx, cons, m, topic, c.Brokers, consumed)
		}
		// Values are random (incompressible) apart from the send time, and
		// sent uncompressed: bytes on disk compare with the bytes sent.
		tmpl := randomPayload(c.BatchBytes)
		pace := newPacer(c.Rate)
		for n := 0; ; n++ {
			if !pace.wait(n, stop) {
				break
			}
			select {
			case <-stop:
			default:
				mu.Lock()
				failed := first != nil
				mu.Unlock()
				if !failed {
					v := slices.Clone(tmpl)
					start := time.Now()
					binary.LittleEndian.PutUint64(v, uint64(start.UnixNano()))
					rec := &kgo.Record{Value: v, Partition: int32(n % active)}
					prod.Produce(ctx, rec, func(r *kgo.Record, err error) {
						if err != nil {
							fail(fmt.Errorf("produce to %s on %s: %w", topic, c.Brokers, err))
							return
						}
						m.record(0, int64(len(r.Value)), 1, time.Since(start))
					})
					continue
				}
			}
			break
		}
		if err := prod.Flush(ctx); err != nil {
			fail(err)
		}
		cancelPoll()
		if err := <-consumed; err != nil {
			fail(err)
		}
		return first
	}
	return w, nil
}

// consume polls cons until ctx ends, recording each record's end-to-end
// latency (from the send time in its value) into series 1 of m; it sends
// the first fetch error (or nil) on done.
func consume(ctx context.Context, cons *kgo.Client, m *meter, topic, brokers string, done chan<- error) {
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			done <- nil
			return
		}
		if errs := fs.Errors(); len(errs) > 0 {
			done <- fmt.Errorf("consume %s from %s: %w", topic, brokers, errs[0].Err)
			return
		}
		now := time.Now().UnixNano()
		fs.EachRecord(func(r *kgo.Record) {
			sent := int64(binary.LittleEndian.Uint64(r.Value))
			m.record(1, int64(len(r.Value)), 1, time.Duration(now-sent))
		})
	}
}

// waitLeaders waits until every partition of topic has a leader (a broker
// may answer CreateTopics before its partitions take writes), at most
// five minutes.
func waitLeaders(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		ready := 0
		if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 {
			for _, p := range resp.Topics[0].Partitions {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					ready++
				}
			}
		}
		if ready == partitions {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s: %d of %d partitions have a leader after 5 minutes (last error %v)", topic, ready, partitions, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pacer spaces records rate a second from its start (rate 0: no wait).
type pacer struct {
	rate  int
	start time.Time
}

func newPacer(rate int) *pacer { return &pacer{rate: rate, start: time.Now()} }

// wait waits until record n is due; false if stop closed first. A pacer
// that fell behind (a full producer buffer) sends the late records at
// once, so the rate holds on average.
func (p *pacer) wait(n int, stop <-chan struct{}) bool {
	if p.rate <= 0 {
		return true
	}
	d := time.Until(p.start.Add(time.Duration(int64(n) * int64(time.Second) / int64(p.rate))))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// createTopic creates topic with partitions partitions on the cluster of cl.
func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 600000 // 10,000 partitions take minutes on a loaded machine
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return errors.New("create topic " + topic + ": no topic in the response")
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}
