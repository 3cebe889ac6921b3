package broker

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Incremental fetch sessions (KIP-227, Fetch v7+). A consumer of many
// partitions fetches them over and over; without a session each request
// lists every partition and each response answers every one, though few
// have new records. In a session the broker keeps the partitions and their
// fetch positions: a request lists only what changed (a new fetch offset,
// a partition added or forgotten) and a response only the partitions with
// records, an error, or a changed high watermark, last stable or log start
// offset.
//
// Sessions live with the connection that made them (a client reconnecting
// starts a new one: FETCH_SESSION_ID_NOT_FOUND makes it do so), at most
// maxSessionsPerConn per connection and Config.MaxFetchSessions per
// broker, each of at most Config.MaxPartitions partitions and all of them
// together of at most maxSessionPartitionsTotal; a request over a limit
// is answered as a sessionless full fetch (session id 0), which every
// client handles, and an incremental request growing a session over one
// ends it (FETCH_SESSION_ID_NOT_FOUND: the client starts over). With authorization on,
// sessions are not created: each full fetch is authorized topic by topic.

// maxSessionsPerConn bounds one connection's fetch sessions (a client
// keeps one per broker).
const maxSessionsPerConn = 8

// maxSessionPartitionsTotal bounds the partitions of all sessions (about
// 200 bytes each).
const maxSessionPartitionsTotal = 1 << 20

// unsent marks a session partition's offsets as not yet sent: its next
// response includes it.
const unsent = -2

// sessionPartition is one partition of a fetch session: the client's
// latest fetch position and the offsets last sent for it.
type sessionPartition struct {
	topic string
	req   kmsg.FetchRequestTopicPartition
	// hwm, lso and logStart were last answered (unsent: never).
	hwm, lso, logStart int64
}

type sessionKey struct {
	topic     string
	partition int32
}

// fetchSession is one incremental fetch session.
type fetchSession struct {
	// mu is held by the fetch using the session (a client sends the next
	// request of a session only after the previous one's response).
	mu    sync.Mutex
	id    int32
	epoch int32 // the epoch the next request must carry
	// parts is the fetch order: partitions that returned records move to
	// the end, so that a response full at FetchMaxBytes does not starve
	// the partitions after them.
	parts []*sessionPartition
	index map[sessionKey]*sessionPartition
	// counted is len(parts) as counted in Broker.sessionPartitions.
	counted int
	// closed: the session was dropped and gave its counts back.
	closed bool
}

// connSessions are a connection's fetch sessions.
type connSessions struct {
	mu sync.Mutex
	m  map[int32]*fetchSession
	// closed: the connection closed and took its sessions down; a fetch
	// still finishing opens none.
	closed bool
}

// sessionIDs numbers sessions across the process (never 0).
var sessionIDs atomic.Int32

func nextSessionID() int32 {
	for {
		if id := sessionIDs.Add(1) & 0x7fffffff; id != 0 {
			return id
		}
	}
}

// nextEpoch is the epoch after e (1 after the largest: 0 and -1 mean a new
// session and a sessionless fetch).
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// closeSession drops session id of the connection (none: nothing to do).
// The caller must not hold that session's lock.
func (b *Broker) closeSession(cc *conn, id int32) {
	cc.sessions.mu.Lock()
	s := cc.sessions.m[id]
	delete(cc.sessions.m, id)
	cc.sessions.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		b.dropSession(s)
		s.mu.Unlock()
	}
}

// closeSessions drops the connection's sessions (it closed), each once no
// fetch uses it.
func (b *Broker) closeSessions(cc *conn) {
	cc.sessions.mu.Lock()
	m := cc.sessions.m
	cc.sessions.m, cc.sessions.closed = nil, true
	cc.sessions.mu.Unlock()
	for _, s := range m {
		s.mu.Lock()
		b.dropSession(s)
		s.mu.Unlock()
	}
}

// endSession drops s, whose lock the caller holds, from the connection.
func (b *Broker) endSession(cc *conn, s *fetchSession) {
	cc.sessions.mu.Lock()
	if cc.sessions.m[s.id] == s {
		delete(cc.sessions.m, s.id)
	}
	cc.sessions.mu.Unlock()
	b.dropSession(s)
}

// dropSession gives back what s counts against the broker's limits, once
// (the caller holds s.mu).
func (b *Broker) dropSession(s *fetchSession) {
	if s.closed {
		return
	}
	s.closed = true
	b.fetchSessions.Add(-1)
	b.sessionPartitions.Add(-int64(s.counted))
}

// newSession makes a session of the partitions of a full fetch and returns
// it locked, or returns nil when a limit leaves no room for it.
func (b *Broker) newSession(cc *conn, topics []kmsg.FetchRequestTopic) *fetchSession {
	n := 0
	for _, rt := range topics {
		n += len(rt.Partitions)
	}
	if n > b.cfg.MaxPartitions || b.acls != nil || b.cfg.MaxFetchSessions < 0 {
		return nil
	}
	cc.sessions.mu.Lock()
	defer cc.sessions.mu.Unlock()
	if cc.sessions.closed || len(cc.sessions.m) >= maxSessionsPerConn {
		return nil
	}
	if b.fetchSessions.Add(1) > int64(b.cfg.MaxFetchSessions) {
		b.fetchSessions.Add(-1)
		return nil
	}
	if b.sessionPartitions.Add(int64(n)) > maxSessionPartitionsTotal {
		b.sessionPartitions.Add(-int64(n))
		b.fetchSessions.Add(-1)
		return nil
	}
	s := &fetchSession{id: nextSessionID(), epoch: 1, parts: make([]*sessionPartition, 0, n), index: make(map[sessionKey]*sessionPartition, n), counted: n}
	for _, rt := range topics {
		for _, rp := range rt.Partitions {
			s.add(rt.Topic, rp)
		}
	}
	if cc.sessions.m == nil {
		cc.sessions.m = make(map[int32]*fetchSession)
	}
	s.mu.Lock()
	cc.sessions.m[s.id] = s
	return s
}

// session returns the connection's session id, locked, checking epoch, or
// the error code to answer.
func (cc *conn) session(id, epoch int32) (*fetchSession, int16) {
	cc.sessions.mu.Lock()
	s := cc.sessions.m[id]
	cc.sessions.mu.Unlock()
	if s == nil {
		return nil, kerr.FetchSessionIDNotFound.Code
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, kerr.FetchSessionIDNotFound.Code
	}
	if s.epoch != epoch {
		s.mu.Unlock()
		return nil, kerr.InvalidFetchSessionEpoch.Code
	}
	s.epoch = nextEpoch(s.epoch)
	return s, 0
}

// add puts a partition into the session or updates its fetch position.
func (s *fetchSession) add(topic string, rp kmsg.FetchRequestTopicPartition) {
	k := sessionKey{topic, rp.Partition}
	if sp := s.index[k]; sp != nil {
		sp.req = rp
		return
	}
	sp := &sessionPartition{topic: topic, req: rp, hwm: unsent, lso: unsent, logStart: unsent}
	s.index[k] = sp
	s.parts = append(s.parts, sp)
}

// update applies an incremental request: changed and added partitions,
// then forgotten ones. It says false when the session grew past a bound.
func (b *Broker) update(s *fetchSession, r *kmsg.FetchRequest) bool {
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			s.add(rt.Topic, rp)
		}
	}
	forgot := false
	for _, ft := range r.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := sessionKey{ft.Topic, p}
			if s.index[k] != nil {
				delete(s.index, k)
				forgot = true
			}
		}
	}
	if forgot {
		kept := s.parts[:0]
		for _, sp := range s.parts {
			if s.index[sessionKey{sp.topic, sp.req.Partition}] == sp {
				kept = append(kept, sp)
			}
		}
		clear(s.parts[len(kept):])
		s.parts = kept
	}
	if d := len(s.parts) - s.counted; d != 0 {
		s.counted = len(s.parts)
		if b.sessionPartitions.Add(int64(d)) > maxSessionPartitionsTotal && d > 0 {
			return false
		}
	}
	return len(s.parts) <= b.cfg.MaxPartitions
}

// topics lists the session's partitions in fetch order, a topic's
// consecutive partitions under one entry, with the session partition of
// each (parallel slices).
func (s *fetchSession) topics() ([]kmsg.FetchRequestTopic, [][]*sessionPartition) {
	var topics []kmsg.FetchRequestTopic
	var parts [][]*sessionPartition
	for _, sp := range s.parts {
		if i := len(topics) - 1; i < 0 || topics[i].Topic != sp.topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = sp.topic
			topics = append(topics, t)
			parts = append(parts, nil)
		}
		i := len(topics) - 1
		topics[i].Partitions = append(topics[i].Partitions, sp.req)
		parts[i] = append(parts[i], sp)
	}
	return topics, parts
}

// mustAnswer says whether an incremental response includes sp's answer
// rp: it has records (records bytes, which fetch keeps beside rp: see
// partRecords), an error, or offsets the client has not seen.
func mustAnswer(sp *sessionPartition, rp *kmsg.FetchResponseTopicPartition, records int) bool {
	return records > 0 || rp.ErrorCode != 0 || len(rp.AbortedTransactions) > 0 ||
		rp.HighWatermark != sp.hwm || rp.LastStableOffset != sp.lso || rp.LogStartOffset != sp.logStart
}

// sent records what resp told the client of the session's partitions, and
// moves those that returned records (recs) to the end of the fetch order.
func (s *fetchSession) sent(resp *kmsg.FetchResponse, recs []partRecords) {
	var moved []*sessionPartition
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			sp := s.index[sessionKey{rt.Topic, rp.Partition}]
			if sp == nil {
				continue
			}
			sp.hwm, sp.lso, sp.logStart = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
		}
	}
	for _, r := range recs {
		if sp := s.index[sessionKey{r.topic, r.partition}]; sp != nil {
			moved = append(moved, sp)
		}
	}
	if len(moved) == 0 || len(moved) == len(s.parts) {
		return
	}
	last := make(map[*sessionPartition]bool, len(moved))
	for _, sp := range moved {
		last[sp] = true
	}
	kept := s.parts[:0]
	for _, sp := range s.parts {
		if !last[sp] {
			kept = append(kept, sp)
		}
	}
	s.parts = append(kept, moved...)
}
