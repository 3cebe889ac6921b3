package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/sharedlog"
)

// checkLeaderEpoch compares a client's current leader epoch with ours
// (-1: the client does not know it).
func (b *Broker) checkLeaderEpoch(e int32) int16 {
	switch {
	case e == -1 || e == b.epoch:
		return 0
	case e > b.epoch:
		return kerr.UnknownLeaderEpoch.Code
	default:
		return kerr.FencedLeaderEpoch.Code
	}
}

// owned returns a partition this broker serves and its log, checking the
// client's current leader epoch (-1: unknown), or the error code to answer.
func (b *Broker) owned(topicName string, partition, leaderEpoch int32) (*partition, *sharedlog.Log, int16) {
	p, code := b.catalog.partitionOf(topicName, partition)
	if code != 0 {
		return nil, nil, code
	}
	l, code := p.current()
	if code != 0 {
		return nil, nil, code
	}
	if code := b.checkLeaderEpoch(leaderEpoch); code != 0 {
		return nil, nil, code
	}
	return p, l, 0
}

// fetch answers a Fetch, long-polling until MinBytes are available,
// MaxWaitMillis passed (KIP-74 byte limits) or ctx (the connection's) ends:
// a client that hangs up does not leave its long poll waiting.
func (b *Broker) fetch(ctx context.Context, r *kmsg.FetchRequest, resp *kmsg.FetchResponse) int16 {
	deadline := time.Now().Add(time.Duration(r.MaxWaitMillis) * time.Millisecond)
	maxBytes := int(r.MaxBytes)
	if r.Version < 3 || maxBytes <= 0 {
		maxBytes = b.cfg.MaxRequestBytes
	}
	iso := sharedlog.Isolation(r.IsolationLevel)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		wake := b.notify.C()
		total, code := b.fetchOnce(r, resp, maxBytes, iso)
		if total >= int(r.MinBytes) || code != 0 || !time.Now().Before(deadline) || b.closed.Load() || b.fenced.Load() {
			return code
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		select {
		case <-wake:
		case <-timer.C:
			_, code := b.fetchOnce(r, resp, maxBytes, iso)
			return code
		case <-ctx.Done(): // the connection's, so also the broker's
			return 0
		}
	}
}

// fetchOnce fills resp from the partitions' current state and returns the
// record bytes it holds and the first partition error code (0: none).
func (b *Broker) fetchOnce(r *kmsg.FetchRequest, resp *kmsg.FetchResponse, maxBytes int, iso sharedlog.Isolation) (int, int16) {
	resp.Topics = resp.Topics[:0]
	total, failed := 0, int16(0)
	for _, rt := range r.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = []byte{} // librdkafka rejects a null record set
			code := b.fetchPartition(rt.Topic, rp, &sp, maxBytes-total, total == 0, iso)
			if code != 0 {
				sp.ErrorCode = code
				if failed == 0 {
					failed = code
				}
			}
			total += len(sp.RecordBatches)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return total, failed
}

func (b *Broker) fetchPartition(topicName string, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition, remaining int, first bool, iso sharedlog.Isolation) int16 {
	p, l, code := b.owned(topicName, rp.Partition, rp.CurrentLeaderEpoch)
	if code != 0 {
		return code
	}
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = l.HighWatermark(), l.LastStableOffset(), l.LogStartOffset()
	limit := int(rp.PartitionMaxBytes)
	if remaining < limit {
		limit = remaining
	}
	if limit <= 0 && !first {
		return 0
	}
	ctx, cancel := b.reqCtx(30 * time.Second)
	defer cancel()
	start := time.Now()
	res, err := l.Read(ctx, rp.FetchOffset, sharedlog.ReadOptions{MaxBytes: max(limit, 1), Isolation: iso})
	if err != nil {
		p.failed(l, err)
		return sharedlog.ErrorCode(err)
	}
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
	// KIP-74: only the first batch of the first non-empty partition may
	// exceed the limits.
	n, size := 0, 0
	for _, bt := range res.Batches {
		if size+len(bt) > limit && !(first && n == 0) {
			break
		}
		size += len(bt)
		n++
	}
	if n > 0 {
		recs := make([]byte, 0, size)
		for _, bt := range res.Batches[:n] {
			recs = append(recs, bt...)
		}
		sp.RecordBatches = recs
		b.metrics.fetched(p.topic.driver, size, time.Since(start))
	}
	for _, a := range res.AbortedTransactions {
		sp.AbortedTransactions = append(sp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	return 0
}
