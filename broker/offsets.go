package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/stratastream/strata/stream"
)

// committed is one committed offset of a group's partition.
type committed struct {
	Group       string `json:"g"`
	Topic       string `json:"t"`
	Partition   int32  `json:"p"`
	Offset      int64  `json:"o"`
	LeaderEpoch int32  `json:"e"`
	Metadata    string `json:"m,omitempty"`
}

type tp struct {
	topic     string
	partition int32
}

// offsetStore keeps committed group offsets in the CLUSTER/__offsets stream
// (one JSON batch per OffsetCommit) and in memory.
type offsetStore struct {
	b *Broker
	s *stream.Stream

	// commitMu serializes appends and compactions; batches counts the
	// batches since the last snapshot.
	commitMu sync.Mutex
	batches  int

	mu     sync.RWMutex
	groups map[string]map[tp]committed
}

func openOffsetStore(ctx context.Context, b *Broker) (*offsetStore, error) {
	name := b.streamName("__offsets")
	s, err := b.cfg.Store.Open(ctx, name, stream.OpenOptions{Epoch: uint64(b.epoch), CreateIfMissing: true})
	if err != nil {
		return nil, fmt.Errorf("broker: opening the group offsets %s on %s: %w", name, b.cfg.Driver, err)
	}
	o := &offsetStore{b: b, s: s, groups: map[string]map[tp]committed{}}
	err = readStream(ctx, s, o.replay)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("broker: reading the group offsets %s on %s: %w", name, b.cfg.Driver, err)
	}
	if o.batches > compactAfter {
		o.commitMu.Lock()
		err := o.compactLocked(ctx)
		o.commitMu.Unlock()
		if err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return o, nil
}

// compactAfter is how many commit batches the offsets stream holds before
// it is rewritten as a snapshot of the current offsets and trimmed.
const compactAfter = 1000

// snapshotChunk is the most offsets written in one snapshot batch.
const snapshotChunk = 4096

// compactLocked appends the current offsets as a snapshot and trims the
// stream to it, so a new owner replays only the snapshot and what follows.
// Replaying a snapshot over older records gives the same state, so a crash
// half way is harmless. commitMu is held.
func (o *offsetStore) compactLocked(ctx context.Context) error {
	var state []committed
	o.mu.RLock()
	for _, g := range o.groups {
		for _, c := range g {
			state = append(state, c)
		}
	}
	o.mu.RUnlock()
	first, chunks := o.s.NextOffset(), 0
	for i := 0; i < len(state); i += snapshotChunk {
		payload, err := json.Marshal(state[i:min(i+snapshotChunk, len(state))])
		if err != nil {
			return err
		}
		res, err := o.b.appendCluster(ctx, &o.s, payload, o.replay)
		if err != nil {
			o.b.checkFenced(err, "offsets snapshot")
			return fmt.Errorf("broker: writing the offsets snapshot to %s: %w", o.s.Name(), err)
		}
		if chunks == 0 {
			first = res.BaseOffset
		}
		chunks++
	}
	if err := o.s.Trim(ctx, first); err != nil {
		o.b.checkFenced(err, "offsets trim")
		return fmt.Errorf("broker: trimming %s to the offsets snapshot at %d: %w", o.s.Name(), first, err)
	}
	o.b.log.Info("group offsets compacted", "stream", o.s.Name(), "offsets", len(state), "start", first)
	o.batches = chunks
	return nil
}

// replay applies one batch of the offsets stream: at takeover, and after
// the stream was reopened (an append whose outcome was unknown).
func (o *offsetStore) replay(payload []byte) error {
	var cs []committed
	if err := json.Unmarshal(payload, &cs); err != nil {
		return fmt.Errorf("decoding committed offsets: %v: %w", err, stream.ErrCorrupt)
	}
	o.apply(cs)
	o.batches++
	return nil
}

func (o *offsetStore) apply(cs []committed) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range cs {
		g := o.groups[c.Group]
		if g == nil {
			g = map[tp]committed{}
			o.groups[c.Group] = g
		}
		if c.Offset < 0 {
			delete(g, tp{c.Topic, c.Partition})
			continue
		}
		g[tp{c.Topic, c.Partition}] = c
	}
}

// commit makes cs durable, then visible.
func (o *offsetStore) commit(ctx context.Context, cs []committed) error {
	if len(cs) == 0 {
		return nil
	}
	payload, err := json.Marshal(cs)
	if err != nil {
		return err
	}
	o.commitMu.Lock()
	defer o.commitMu.Unlock()
	// Checked under commitMu: release (the offsets moving to another
	// broker) may have closed the stream since the commit was admitted.
	if o.s == nil {
		return fmt.Errorf("broker: committing offsets of group %s: %w", cs[0].Group, errNotCoordinator)
	}
	if _, err := o.b.appendCluster(ctx, &o.s, payload, o.replay); err != nil {
		o.b.checkFenced(err, "offset commit")
		return fmt.Errorf("broker: committing offsets of group %s to %s: %w", cs[0].Group, o.s.Name(), err)
	}
	o.apply(cs)
	o.batches++
	if o.batches > compactAfter {
		if err := o.compactLocked(ctx); err != nil {
			o.b.log.Warn("compacting group offsets failed; will retry", "err", err)
		}
	}
	return nil
}

// fetch returns a group's committed offset of a partition.
func (o *offsetStore) fetch(group, topic string, p int32) (committed, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	c, ok := o.groups[group][tp{topic, p}]
	return c, ok
}

// all returns every committed offset of a group, sorted.
func (o *offsetStore) all(group string) []committed {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []committed
	for _, c := range o.groups[group] {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// groupNames returns the groups with committed offsets.
func (o *offsetStore) groupNames() []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []string
	for g, m := range o.groups {
		if len(m) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// forgetTopic removes a deleted topic's committed offsets, durably
// (tombstones: offset -1), so a recreated topic starts without commits.
func (o *offsetStore) forgetTopic(ctx context.Context, topic string) error {
	var cs []committed
	o.mu.RLock()
	for g, m := range o.groups {
		for k := range m {
			if k.topic == topic {
				cs = append(cs, committed{Group: g, Topic: topic, Partition: k.partition, Offset: -1})
			}
		}
	}
	o.mu.RUnlock()
	return o.commit(ctx, cs)
}

func (o *offsetStore) close() error {
	o.commitMu.Lock()
	defer o.commitMu.Unlock()
	if o.s == nil {
		return nil
	}
	return o.s.Close()
}
