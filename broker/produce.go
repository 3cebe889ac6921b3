package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/sharedlog"
)

// produceItem is one partition of a Produce request with its append started.
type produceItem struct {
	rp    *kmsg.ProduceResponseTopicPartition
	p     *partition
	l     *sharedlog.Log
	f     *sharedlog.AppendFuture
	bytes int
}

// produce starts every partition's append in request order (so an
// idempotent producer's pipelined requests keep their sequence order) and
// returns the function that waits for them to be durable.
func (b *Broker) produce(r *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) func() kmsg.Response {
	start := time.Now()
	var items []produceItem
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rpp := range rt.Partitions {
			rp := &st.Partitions[i]
			rp.Default()
			rp.Partition = rpp.Partition
			rp.BaseOffset = -1
			rp.LogAppendTime = -1
			rp.LogStartOffset = -1
			if r.TransactionID != nil {
				rp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				rp.ErrorMessage = errString("transactions are not supported by this broker")
				continue
			}
			p, l, code := b.owned(rt.Topic, rpp.Partition, -1)
			if code == kerr.NotLeaderForPartition.Code && b.cl != nil {
				// In a cluster: a partition that just moved here is
				// waited for; one that moved away is named (KIP-951).
				p, _ = b.catalog.partitionOf(rt.Topic, rpp.Partition)
				if l = b.awaitOpen(p); l != nil {
					code = 0
				}
			}
			if code != 0 {
				if p == nil && b.cl != nil {
					p, _ = b.catalog.partitionOf(rt.Topic, rpp.Partition)
				}
				rp.ErrorCode = b.movedCode(p, code)
				b.leaderHint(resp, rp, p)
				continue
			}
			items = append(items, produceItem{rp: rp, p: p, l: l, bytes: len(rpp.Records),
				f: l.AppendAsync(b.ctx, rpp.Records, sharedlog.AppendOptions{})})
		}
		resp.Topics = append(resp.Topics, st)
	}
	// Items point into resp.Topics[i].Partitions, whose backing arrays do
	// not move after this point.
	return func() kmsg.Response {
		timeout := max(time.Duration(r.TimeoutMillis)*time.Millisecond, 30*time.Second)
		ctx, cancel := b.reqCtx(timeout)
		defer cancel()
		var worst int16
		for _, it := range items {
			res, err := it.f.Wait(ctx)
			if err != nil {
				it.rp.ErrorCode = sharedlog.ErrorCode(err)
				if r.Version >= 8 {
					it.rp.ErrorMessage = errString(err.Error())
				}
				it.p.failed(it.l, err)
				it.rp.ErrorCode = b.movedCode(it.p, it.rp.ErrorCode)
				b.leaderHint(resp, it.rp, it.p)
				if worst == 0 {
					worst = it.rp.ErrorCode
				}
				b.log.Debug("produce failed", "topic", it.p.topic.name, "partition", it.p.index, "err", err)
				continue
			}
			it.rp.BaseOffset = res.BaseOffset
			it.rp.LogAppendTime = res.LogAppendTime
			it.rp.LogStartOffset = res.LogStartOffset
			b.metrics.produced(it.p.topic.driver, it.bytes, time.Since(start))
			b.notify.Broadcast()
		}
		b.metrics.request(r.Key(), worst)
		if r.Acks == 0 {
			return nil
		}
		return resp
	}
}
