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
func checkLeaderEpoch(e, ours int32) int16 {
	switch {
	case e == -1 || e == ours:
		return 0
	case e > ours:
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
	if code := checkLeaderEpoch(leaderEpoch, p.leaderEpoch()); code != 0 {
		return nil, nil, code
	}
	return p, l, 0
}

// fetch answers a Fetch, long-polling until MinBytes are available,
// MaxWaitMillis passed (KIP-74 byte limits) or ctx (the connection's) ends:
// a client that hangs up does not leave its long poll waiting. The
// response holds at most FetchMaxBytes of records whatever the client asks
// (the first batch whole, as KIP-74 wants), a partition listed more than
// once is answered once, and the records it holds count against the
// broker's FetchMemoryBytes until p is written.
//
// From v7 a request may open, use or close an incremental fetch session
// (fetchsession.go).
func (b *Broker) fetch(cc *conn, r *kmsg.FetchRequest, resp *kmsg.FetchResponse, p *pending) int16 {
	f := &fetchState{b: b, maxBytes: b.cfg.FetchMaxBytes, iso: sharedlog.Isolation(r.IsolationLevel)}
	defer func() { p.records = f.recs }()
	if r.Version < 7 || r.SessionEpoch < 0 {
		if r.Version >= 7 && r.SessionID != 0 {
			b.closeSession(cc, r.SessionID) // epoch -1: the client ends it
		}
		f.topics = uniqueFetchTopics(r.Topics)
		return b.longPoll(cc.ctx, f, r, resp, p)
	}
	if r.SessionEpoch == 0 { // a full fetch that opens a session
		if r.SessionID != 0 {
			b.closeSession(cc, r.SessionID)
		}
		f.topics = uniqueFetchTopics(r.Topics)
		s := b.newSession(cc, f.topics)
		if s == nil {
			return b.longPoll(cc.ctx, f, r, resp, p)
		}
		defer s.mu.Unlock()
		code := b.longPoll(cc.ctx, f, r, resp, p)
		resp.SessionID = s.id
		s.sent(resp, f.recs)
		return code
	}
	s, code := cc.session(r.SessionID, r.SessionEpoch)
	if code != 0 {
		resp.ErrorCode = code
		return code
	}
	defer s.mu.Unlock()
	if !b.update(s, r) {
		b.endSession(cc, s)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp.ErrorCode
	}
	f.topics, f.session = s.topics()
	code = b.longPoll(cc.ctx, f, r, resp, p)
	resp.SessionID = s.id
	s.sent(resp, f.recs)
	return code
}

// longPoll answers f's partitions into resp, waiting as fetch says.
func (b *Broker) longPoll(ctx context.Context, f *fetchState, r *kmsg.FetchRequest, resp *kmsg.FetchResponse, p *pending) int16 {
	deadline := time.Now().Add(time.Duration(r.MaxWaitMillis) * time.Millisecond)
	if r.Version >= 3 && r.MaxBytes > 0 {
		f.maxBytes = min(f.maxBytes, int(r.MaxBytes))
	}
	p.release = f.release
	var cancel context.CancelFunc
	f.ctx, cancel = context.WithDeadline(ctx, deadline)
	defer cancel()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		wake := b.notify.C()
		total, code := f.once(resp)
		if total >= int(r.MinBytes) || code != 0 || !time.Now().Before(deadline) || b.closed.Load() || b.fenced.Load() {
			return code
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		// Wait for an append that gives one of these partitions records
		// (appends to others wake the poll too: ready looks, cheaply).
		for {
			select {
			case <-wake:
			case <-timer.C:
				_, code := f.once(resp)
				return code
			case <-ctx.Done(): // the connection's, so also the broker's
				return 0
			}
			wake = b.notify.C()
			if f.ready() || b.closed.Load() || b.fenced.Load() {
				break
			}
		}
	}
}

// uniqueFetchTopics returns a Fetch's topics with each partition once, at
// its first listing: a topic listed twice is one topic, a partition listed
// twice is read once.
func uniqueFetchTopics(in []kmsg.FetchRequestTopic) []kmsg.FetchRequestTopic {
	if len(in) == 1 && uniquePartitions(in[0].Partitions) {
		return in // the usual request: one topic, each partition once
	}
	type key struct {
		topic     string
		partition int32
	}
	seen := make(map[key]bool)
	at := make(map[string]int, len(in))
	out := make([]kmsg.FetchRequestTopic, 0, len(in))
	for _, rt := range in {
		i, ok := at[rt.Topic]
		if !ok {
			i = len(out)
			at[rt.Topic] = i
			t := rt
			t.Partitions = make([]kmsg.FetchRequestTopicPartition, 0, len(rt.Partitions))
			out = append(out, t)
		}
		for _, rp := range rt.Partitions {
			if k := (key{rt.Topic, rp.Partition}); !seen[k] {
				seen[k] = true
				out[i].Partitions = append(out[i].Partitions, rp)
			}
		}
	}
	return out
}

// uniquePartitions says no partition is listed twice in ps, without a map
// when the ids are small (a bitmap of the largest id's size).
func uniquePartitions(ps []kmsg.FetchRequestTopicPartition) bool {
	maxID := int32(-1)
	for _, rp := range ps {
		if rp.Partition < 0 {
			return false // let the general path keep it, once
		}
		maxID = max(maxID, rp.Partition)
	}
	if int(maxID) >= 64*len(ps)+64 {
		return false // sparse ids: the general path's map
	}
	seen := make([]uint64, maxID/64+1)
	for _, rp := range ps {
		w, bit := rp.Partition/64, uint64(1)<<(rp.Partition%64)
		if seen[w]&bit != 0 {
			return false
		}
		seen[w] |= bit
	}
	return true
}

// fetchState is one Fetch request being answered.
type fetchState struct {
	b      *Broker
	ctx    context.Context // the connection's, until the fetch's deadline
	topics []kmsg.FetchRequestTopic
	// session, for an incremental fetch, holds the session partition of
	// each of topics' partitions: the response leaves out those with
	// nothing new (nil: a full fetch answers every partition).
	session  [][]*sessionPartition
	maxBytes int
	iso      sharedlog.Isolation
	// held is the bytes of the response's records taken from the broker's
	// fetch memory budget.
	held int64
	// recs are the records of the response's partitions that have some,
	// in response order: written from the logs' buffers (fetchwire.go).
	recs []partRecords
}

// release gives the response's bytes back to the fetch memory budget.
func (f *fetchState) release() {
	f.b.fetchMem.release(f.held)
	f.held = 0
}

// once fills resp from the partitions' current state and returns the
// record bytes it holds and the first partition error code (0: none).
func (f *fetchState) once(resp *kmsg.FetchResponse) (int, int16) {
	f.release()
	resp.Topics = resp.Topics[:0]
	f.recs = f.recs[:0]
	total, failed := 0, int16(0)
	for ti, rt := range f.topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		if f.session == nil {
			st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		}
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = []byte{} // librdkafka rejects a null record set
			batches, size, code := f.partition(rt.Topic, rp, &sp, f.maxBytes-total, total == 0)
			if code != 0 {
				sp.ErrorCode = code
				if failed == 0 {
					failed = code
				}
			}
			total += size
			if f.session != nil && !mustAnswer(f.session[ti][pi], &sp, size) {
				continue
			}
			if size > 0 {
				f.recs = append(f.recs, partRecords{topic: rt.Topic, partition: rp.Partition, batches: batches, size: size})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		if f.session != nil && len(st.Partitions) == 0 {
			continue
		}
		resp.Topics = append(resp.Topics, st)
	}
	return total, failed
}

// ready says whether a pass over the partitions may answer more than the
// last one, which had too little: some partition has records past its
// fetch offset, or now fails. It reads nothing and allocates nothing, so
// a long poll woken by appends to other partitions costs a look at each
// of its partitions' high watermark, not a response built again.
func (f *fetchState) ready() bool {
	for _, rt := range f.topics {
		for _, rp := range rt.Partitions {
			_, l, code := f.b.owned(rt.Topic, rp.Partition, rp.CurrentLeaderEpoch)
			if code != 0 || l.HighWatermark() != rp.FetchOffset {
				return true
			}
		}
	}
	return false
}

// reserve takes n bytes of the fetch memory budget for a read: waiting for
// room when the response holds nothing yet, else only if they fit now (a
// request never waits while holding bytes).
func (f *fetchState) reserve(n int64, first bool) bool {
	if first {
		return f.b.fetchMem.acquire(f.ctx, n) == nil
	}
	return f.b.fetchMem.tryAcquire(n)
}

// partition answers one partition into sp, except for its records: it
// returns those (the log's buffers, not copied) and their bytes.
func (f *fetchState) partition(topicName string, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition, remaining int, first bool) ([][]byte, int, int16) {
	b := f.b
	p, l, code := b.owned(topicName, rp.Partition, rp.CurrentLeaderEpoch)
	if code != 0 {
		return nil, 0, code
	}
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = l.HighWatermark(), l.LastStableOffset(), l.LogStartOffset()
	limit := min(int(rp.PartitionMaxBytes), remaining)
	if limit <= 0 && !first {
		return nil, 0, 0
	}
	if rp.FetchOffset == sp.HighWatermark && f.iso == sharedlog.ReadUncommitted {
		return nil, 0, 0 // nothing to read: no memory to reserve
	}
	reserved := int64(max(limit, 1))
	if !f.reserve(reserved, first) {
		return nil, 0, 0 // no room in the fetch memory budget: no records this time
	}
	ctx, cancel := b.reqCtx(30 * time.Second)
	defer cancel()
	start := time.Now()
	res, err := l.Read(ctx, rp.FetchOffset, sharedlog.ReadOptions{MaxBytes: max(limit, 1), Isolation: f.iso})
	if err != nil {
		p.readFailed(err)
		if len(res.Batches) == 0 {
			b.fetchMem.release(reserved)
			return nil, 0, sharedlog.ErrorCode(err)
		}
		// The batches before an unreadable one: the client reads them and
		// gets the error when it fetches from the unreadable batch.
		b.log.Warn("fetch: returning the batches before an unreadable one", "topic", topicName, "partition", rp.Partition, "offset", rp.FetchOffset, "batches", len(res.Batches), "err", err)
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
	if s := int64(size); s < reserved {
		b.fetchMem.release(reserved - s)
	} else if s > reserved {
		b.fetchMem.force(s - reserved)
	}
	f.held += int64(size)
	if n > 0 {
		b.metrics.fetched(p.topic.driver, size, time.Since(start))
	}
	for _, a := range res.AbortedTransactions {
		sp.AbortedTransactions = append(sp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	return res.Batches[:n], size, 0
}
