package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/sharedlog"
)

// produceItem is one partition of a Produce request with its append started.
type produceItem struct {
	rp      *kmsg.ProduceResponseTopicPartition
	p       *partition
	l       *sharedlog.Log
	f       *sharedlog.AppendFuture
	records []byte
}

// produce starts every partition's append in request order (so an
// idempotent producer's pipelined requests keep their sequence order) and
// returns the function that waits for them to be durable.
func (b *Broker) produce(r *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) func() kmsg.Response {
	pr := b.newProduce(r, resp)
	for _, rt := range r.Topics {
		parts := pr.topic(rt.Topic, len(rt.Partitions))
		for i, rpp := range rt.Partitions {
			pr.partition(rt.Topic, &parts[i], rpp.Partition, rpp.Records)
		}
	}
	return pr.finish()
}

// produceReq is a Produce request whose partitions' appends are being
// started, one partition at a time: from a decoded request (produce) or
// as each partition's records arrive (readProduce). r's Topics are not
// used: only its version, transactional ID, acks and timeout.
type produceReq struct {
	b     *Broker
	r     *kmsg.ProduceRequest
	resp  *kmsg.ProduceResponse
	start time.Time
	items []produceItem
	// recycle: each partition's records are a buffer of their own, given
	// back to the body pools once their append completed (bodypool.go).
	recycle bool
}

func (b *Broker) newProduce(r *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) *produceReq {
	return &produceReq{b: b, r: r, resp: resp, start: time.Now()}
}

// topic adds the response of a topic of n partitions and returns them.
// Their backing array does not move after this: items point into it.
func (pr *produceReq) topic(name string, n int) []kmsg.ProduceResponseTopicPartition {
	st := kmsg.NewProduceResponseTopic()
	st.Topic = name
	st.Partitions = make([]kmsg.ProduceResponseTopicPartition, n)
	pr.resp.Topics = append(pr.resp.Topics, st)
	return st.Partitions
}

// partition starts the append of one partition's records, or sets rp's
// error.
func (pr *produceReq) partition(topic string, rp *kmsg.ProduceResponseTopicPartition, partition int32, records []byte) {
	b := pr.b
	rp.Default()
	rp.Partition = partition
	rp.BaseOffset = -1
	rp.LogAppendTime = -1
	rp.LogStartOffset = -1
	if pr.r.TransactionID != nil {
		rp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		rp.ErrorMessage = errString("transactions are not supported by this broker")
		pr.done(records)
		return
	}
	p, l, code := b.owned(topic, partition, -1)
	if code == kerr.NotLeaderForPartition.Code && b.cl != nil {
		// In a cluster: a partition that just moved here is
		// waited for; one that moved away is named (KIP-951).
		p, _ = b.catalog.partitionOf(topic, partition)
		if l = b.awaitOpen(p); l != nil {
			code = 0
		}
	}
	if code != 0 {
		if p == nil && b.cl != nil {
			p, _ = b.catalog.partitionOf(topic, partition)
		}
		rp.ErrorCode = b.movedCode(p, code)
		b.leaderHint(pr.resp, rp, p)
		pr.done(records)
		return
	}
	pr.items = append(pr.items, produceItem{rp: rp, p: p, l: l, records: records,
		f: l.AppendAsync(b.ctx, records, sharedlog.AppendOptions{})})
}

// done gives a partition's records back to the body pools (recycle) once
// nothing holds them.
func (pr *produceReq) done(records []byte) {
	if pr.recycle {
		putBody(records)
	}
}

// finish returns the function that waits for the appends started to be
// durable and fills in the response. All of the request's appends have
// started: its logs are told (Flush) that no more follow, so that a
// stream set with FlushWhenIdle cuts them without waiting out its linger.
func (pr *produceReq) finish() func() kmsg.Response {
	b, r, resp, items, start := pr.b, pr.r, pr.resp, pr.items, pr.start
	for _, it := range items {
		it.l.Flush() // the first cuts what its stream set holds, the rest find it cut
	}
	return func() kmsg.Response {
		timeout := max(time.Duration(r.TimeoutMillis)*time.Millisecond, 30*time.Second)
		ctx, cancel := b.reqCtx(timeout)
		defer cancel()
		var worst int16
		for _, it := range items {
			res, err := it.f.Wait(ctx)
			select {
			case <-it.f.Done(): // the log and its stream are done with the records
				pr.done(it.records)
			default: // the request timed out first
			}
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
			b.metrics.produced(it.p.topic.driver, len(it.records), time.Since(start))
			b.notify.Broadcast()
		}
		b.metrics.request(r.Key(), worst)
		if r.Acks == 0 {
			return nil
		}
		return resp
	}
}
