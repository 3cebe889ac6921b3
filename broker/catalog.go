package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/internal/cluster"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/stream"
)

// catalogRecord is one entry of the CLUSTER/__topics stream (JSON).
type catalogRecord struct {
	// Op is "create", "delete" or "partitions".
	Op         string            `json:"op"`
	Name       string            `json:"name"`
	ID         string            `json:"id,omitempty"`
	Partitions int32             `json:"partitions,omitempty"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// topic is one topic of the catalog.
type topic struct {
	name    string
	id      [16]byte
	configs map[string]string
	driver  string
	store   *stream.Store
	parts   []*partition // grows by CreatePartitions; guarded by catalog.mu
	logOnce sync.Once
	log     *slog.Logger // the broker's logger with the topic, shared by its partitions
}

// partition is one partition this broker owns.
type partition struct {
	b     *Broker
	topic *topic
	index int32
	name  string // sharedlog partition name (stream prefix)

	mu  sync.Mutex
	log *sharedlog.Log
	err error // why log is nil
	// reopening is set while a background open runs: of a broken log (log
	// set, still serving reads) or of a partition that failed to open (log
	// nil: calls on it get KAFKA_STORAGE_ERROR).
	reopening bool
	// gen counts the opens and closes of the log: a background open begun
	// at an older gen gives up.
	gen uint64
	// epoch is the epoch the partition is opened at in a cluster (its
	// assignment's); the broker epoch on a single broker.
	epoch int32
}

// catalog is the topic catalog, kept in the CLUSTER/__topics stream, which
// this broker holds open read-write at its epoch.
type catalog struct {
	b       *Broker
	s       *stream.Stream
	adminMu sync.Mutex // serializes creates, deletes and partition changes

	mu     sync.RWMutex
	topics map[string]*topic
}

func openCatalog(ctx context.Context, b *Broker) (*catalog, error) {
	name := b.streamName("__topics")
	s, err := b.cfg.Store.Open(ctx, name, stream.OpenOptions{Epoch: uint64(b.epoch), CreateIfMissing: true})
	if err != nil {
		return nil, fmt.Errorf("broker: opening the topic catalog %s on %s: %w", name, b.cfg.Driver, err)
	}
	c := &catalog{b: b, s: s, topics: map[string]*topic{}}
	err = readStream(ctx, s, func(payload []byte) error {
		r, err := decodeCatalogRecord(payload)
		if err != nil {
			return err
		}
		return c.apply(r)
	})
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("broker: reading the topic catalog %s on %s: %w", name, b.cfg.Driver, err)
	}
	return c, nil
}

func decodeCatalogRecord(payload []byte) (catalogRecord, error) {
	var r catalogRecord
	if err := json.Unmarshal(payload, &r); err != nil {
		return r, fmt.Errorf("decoding catalog record: %v: %w", err, stream.ErrCorrupt)
	}
	return r, nil
}

// readStream calls fn with every batch payload of s, in order.
func readStream(ctx context.Context, s *stream.Stream, fn func([]byte) error) error {
	return readStreamFrom(ctx, s, s.StartOffset(), func(bt stream.Batch) error { return fn(bt.Payload) })
}

// readStreamFrom calls fn with every batch of s from offset from (a batch
// boundary) to its NextOffset, in order.
func readStreamFrom(ctx context.Context, s *stream.Stream, from int64, fn func(stream.Batch) error) error {
	for off := from; off < s.NextOffset(); {
		bs, err := s.Fetch(ctx, off, stream.NoEnd, 0)
		if err != nil {
			return err
		}
		if len(bs) == 0 {
			break
		}
		for _, bt := range bs {
			if err := fn(bt); err != nil {
				return fmt.Errorf("%s offset %d: %w", s.Name(), bt.BaseOffset, err)
			}
			off = bt.EndOffset()
		}
	}
	return nil
}

// replay applies a catalog record read back after the catalog stream was
// reopened (an append whose outcome was unknown) and opens the partitions
// it added.
func (c *catalog) replay(payload []byte) error {
	r, err := decodeCatalogRecord(payload)
	if err != nil {
		return err
	}
	if err := c.apply(r); err != nil {
		return err
	}
	if t := c.lookup(r.Name); t != nil && r.Op != "delete" {
		var closed []*partition
		c.mu.RLock()
		for _, p := range t.parts {
			p.mu.Lock()
			if p.log == nil && !p.reopening {
				closed = append(closed, p)
			}
			p.mu.Unlock()
		}
		c.mu.RUnlock()
		c.b.keepFailed(openPartitions(c.b.ctx, closed))
	}
	return nil
}

// apply changes the in-memory catalog by r (no I/O).
func (c *catalog) apply(r catalogRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.Op {
	case "create":
		id, err := hex.DecodeString(r.ID)
		if err != nil || len(id) != 16 {
			return fmt.Errorf("topic %s: bad id %q: %w", r.Name, r.ID, stream.ErrCorrupt)
		}
		t := &topic{name: r.Name, configs: r.Configs}
		copy(t.id[:], id)
		t.driver, t.store = c.b.storeFor(r.Name)
		for i := int32(0); i < r.Partitions; i++ {
			t.parts = append(t.parts, c.newPartition(t, i))
		}
		c.topics[r.Name] = t
	case "delete":
		delete(c.topics, r.Name)
	case "partitions":
		t := c.topics[r.Name]
		if t == nil {
			return nil
		}
		for i := int32(len(t.parts)); i < r.Partitions; i++ {
			t.parts = append(t.parts, c.newPartition(t, i))
		}
	default:
		return fmt.Errorf("unknown catalog op %q: %w", r.Op, stream.ErrCorrupt)
	}
	return nil
}

func (c *catalog) newPartition(t *topic, i int32) *partition {
	return &partition{
		b: c.b, topic: t, index: i,
		name: c.b.streamName("t/" + hex.EncodeToString(t.id[:]) + "/" + strconv.Itoa(int(i))),
		err:  errors.New("not opened yet"),
	}
}

// storeFor returns the store that holds topic name.
func (b *Broker) storeFor(name string) (string, *stream.Store) {
	for _, r := range b.cfg.Routes {
		if len(name) >= len(r.Prefix) && name[:len(r.Prefix)] == r.Prefix {
			return r.Driver, r.Store
		}
	}
	return b.cfg.Driver, b.cfg.Store
}

// openAll opens every partition of the catalog (a takeover), up to
// partitionOpens at once. A partition that fails for a reason of its own
// is left failed and retried in the background (keepFailed); the
// takeover fails only as takeoverErr says.
func (c *catalog) openAll(ctx context.Context) error {
	var parts []*partition
	c.mu.RLock()
	for _, t := range c.topics {
		parts = append(parts, t.parts...)
	}
	c.mu.RUnlock()
	failed := openPartitions(ctx, parts)
	if err := takeoverErr(ctx, parts, failed); err != nil {
		return err
	}
	c.b.keepFailed(failed)
	return nil
}

// partitionOpens bounds the partitions opened at once. An open on an
// object store is a chain of dependent requests (sharedlog opens a
// partition's two streams at once), so a takeover's time is about
// partitions / partitionOpens times one open's.
const partitionOpens = 32

// openPartitions opens parts, up to partitionOpens at once, and returns
// those that failed (in no order), each left closed with its error.
func openPartitions(ctx context.Context, parts []*partition) []openFailure {
	var mu sync.Mutex
	var failed []openFailure
	eachPartition(parts, func(p *partition) {
		if gen, err := p.open(ctx); err != nil {
			mu.Lock()
			failed = append(failed, openFailure{p, gen, err})
			mu.Unlock()
		}
	})
	return failed
}

// eachPartition calls fn for every partition of parts, partitionOpens at
// once, and returns when all calls have.
func eachPartition(parts []*partition, fn func(*partition)) {
	sem := make(chan struct{}, partitionOpens)
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(p)
		}()
	}
	wg.Wait()
}

// options are the sharedlog options of a topic's partitions.
func (t *topic) options(b *Broker) sharedlog.Options {
	t.logOnce.Do(func() { t.log = b.log.With("topic", t.name) })
	o := sharedlog.Options{Epoch: b.epoch, Logger: t.log}
	if v, ok := t.configs["retention.ms"]; ok {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
			o.RetentionTime = time.Duration(ms) * time.Millisecond
		}
	}
	if v, ok := t.configs["retention.bytes"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			o.RetentionBytes = n
		}
	}
	if v, ok := t.configs["max.message.bytes"]; ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			o.MaxBatchBytes = n
		}
	}
	o.LogAppendTime = t.configs["message.timestamp.type"] == "LogAppendTime"
	return o
}

// open opens the partition's log at the broker epoch (its assignment's
// in a cluster), replacing whatever it held; a failure is the caller's to
// log (keepFailed). It returns the log's new gen.
func (p *partition) open(ctx context.Context) (uint64, error) {
	start := time.Now()
	l, err := p.openLog(ctx)
	p.mu.Lock()
	p.gen++
	gen := p.gen
	p.log, p.err, p.reopening = l, err, false
	p.mu.Unlock()
	if err != nil {
		return gen, err
	}
	if p.b.cl != nil {
		p.b.cl.opened()
	}
	rec := l.Recovery()
	p.b.log.Debug("partition opened", "topic", p.topic.name, "partition", p.index, "hw", l.HighWatermark(),
		"replayed_batches", rec.ReplayedBatches, "took", time.Since(start).Round(time.Millisecond))
	return gen, nil
}

// openLog opens a new session of the partition's log at the broker epoch
// (a fence found on the way fences the broker).
func (p *partition) openLog(ctx context.Context) (*sharedlog.Log, error) {
	o := p.topic.options(p.b)
	if p.b.cl != nil {
		p.mu.Lock()
		o.Epoch = p.epoch
		p.mu.Unlock()
	}
	l, err := sharedlog.Open(ctx, p.topic.store, p.name, o)
	if err != nil {
		p.b.checkFenced(err, "opening "+p.String())
		return nil, fmt.Errorf("broker: opening partition %s (%s) on %s: %w", p, p.name, p.topic.driver, err)
	}
	return l, nil
}

func (p *partition) String() string { return fmt.Sprintf("%s-%d", p.topic.name, p.index) }

// current returns the open log or the Kafka error code to answer with.
func (p *partition) current() (*sharedlog.Log, int16) {
	if p.b.fenced.Load() {
		return nil, kerr.NotLeaderForPartition.Code
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log == nil {
		if p.reopening { // failed to open; retried in the background
			return nil, kerr.KafkaStorageError.Code
		}
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p.log, 0
}

// readFailed handles an error of a read: a fence stops the broker
// serving; any other read error (a corrupt or unreachable chunk) leaves
// the log open for writes and for reads elsewhere.
func (p *partition) readFailed(err error) {
	if errors.Is(err, stream.ErrFenced) && p.b.cl != nil {
		if l, _ := p.current(); l != nil {
			p.fencedInCluster(l)
		}
		return
	}
	if errors.Is(err, stream.ErrFenced) {
		p.b.setFenced("read of " + p.String())
	}
}

// reopenLogEvery is how often a partition that keeps failing to reopen
// logs it (the first failure is logged at once).
const reopenLogEvery = 30 * time.Second

// failed handles an error of a write to l: a fence stops the broker
// serving; a broken log (a failed append) is reopened in the background,
// which recovers its durable state. Until a new session opens, l stays
// the partition's log: reads of its durable data are served from it and
// writes fail with its error.
func (p *partition) failed(l *sharedlog.Log, err error) {
	if isFence(err) && p.b.cl != nil {
		p.fencedInCluster(l)
		return
	}
	if errors.Is(err, stream.ErrFenced) {
		p.b.setFenced("append to " + p.String())
		return
	}
	switch sharedlog.ErrorCode(err) {
	case kerr.KafkaStorageError.Code, kerr.UnknownServerError.Code, kerr.NotLeaderForPartition.Code:
	default:
		return // validation, offsets, timeouts: the log is unchanged
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	p.mu.Lock()
	if p.log != l || p.reopening || p.b.closed.Load() {
		p.mu.Unlock()
		return
	}
	p.reopening = true
	gen := p.gen
	p.mu.Unlock()
	p.b.log.Warn("partition write failed; reopening (reads go on meanwhile)", "topic", p.topic.name, "partition", p.index, "err", err)
	p.b.wg.Add(1)
	go func() {
		defer p.b.wg.Done()
		p.reopen(l, gen, time.Time{})
	}()
}

// reopen opens a new session of the partition's log to replace l (a
// broken log, or nil for a partition that failed to open), retrying with
// backoff until it succeeds, the broker closes or is fenced, or the log
// is closed or opened anew (gen moved on). Failures are logged at most
// every reopenLogEvery, counting from logged (zero: the first at once).
func (p *partition) reopen(l *sharedlog.Log, gen uint64, logged time.Time) {
	defer func() {
		p.mu.Lock()
		if p.gen == gen {
			p.reopening = false
		}
		p.mu.Unlock()
	}()
	began := time.Now()
	for attempt := 1; !p.b.closed.Load() && !p.b.fenced.Load() && p.atGen(gen); attempt++ {
		ctx, cancel := context.WithTimeout(p.b.ctx, 30*time.Second)
		nl, err := p.openLog(ctx)
		cancel()
		if err == nil {
			p.mu.Lock()
			swapped := p.gen == gen && p.log == l
			if swapped {
				p.log, p.err, p.reopening = nl, nil, false
			}
			p.mu.Unlock()
			if !swapped { // closed, deleted or opened anew meanwhile
				_ = nl.Close()
				return
			}
			if l != nil {
				_ = l.Close()
			} else {
				p.b.noteOpened(p)
			}
			p.b.log.Info("partition reopened", "topic", p.topic.name, "partition", p.index, "attempts", attempt, "took", time.Since(began).Round(time.Millisecond))
			return
		}
		if isFence(err) {
			// A newer owner has the partition: on a single broker the
			// broker is fenced now; in a cluster only this partition is.
			if l != nil && p.b.cl != nil {
				p.fencedInCluster(l)
			}
			return
		}
		if time.Since(logged) >= reopenLogEvery {
			logged = time.Now()
			p.b.log.Error("reopening partition failed; retrying", "topic", p.topic.name, "partition", p.index, "attempts", attempt, "failing_for", time.Since(began).Round(time.Second), "err", err)
		}
		select {
		case <-p.b.ctx.Done():
		case <-time.After(reopenBackoff(attempt, err)):
		}
	}
}

// reopenBackoff is the wait after a failed reopen attempt: 200ms more per
// attempt up to 2s, and for corrupt data (which only an operator mends),
// doubling up to 30s.
func reopenBackoff(attempt int, err error) time.Duration {
	if errors.Is(err, stream.ErrCorrupt) {
		return min(200*time.Millisecond<<min(attempt, 8), 30*time.Second)
	}
	return time.Duration(min(attempt, 10)) * 200 * time.Millisecond
}

// atGen reports whether the log was not closed or opened anew since gen.
func (p *partition) atGen(gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen == gen
}

// closeLog closes the partition's log (shutdown, delete) and stops a
// background reopen.
func (p *partition) closeLog() error {
	p.mu.Lock()
	l := p.log
	p.gen++
	p.log, p.err, p.reopening = nil, errors.New("closed"), false
	p.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.Close()
}

// lookup returns a topic by name.
func (c *catalog) lookup(name string) *topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.topics[name]
}

// partitionOf returns a topic's partition, or the error code to answer.
func (c *catalog) partitionOf(topicName string, i int32) (*partition, int16) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t := c.topics[topicName]
	if t == nil || i < 0 || int(i) >= len(t.parts) {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	return t.parts[i], 0
}

// list returns every topic sorted by name, with its partition count.
func (c *catalog) list() []*topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*topic, 0, len(c.topics))
	for _, t := range c.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (c *catalog) count() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.topics)
}

func (c *catalog) numPartitions(t *topic) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return int32(len(t.parts))
}

// appendRecord makes r durable in the catalog stream.
func (c *catalog) appendRecord(ctx context.Context, r catalogRecord) error {
	if c.b.cl != nil {
		return c.b.clusterTopic(ctx, r)
	}
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = c.b.appendCluster(ctx, &c.s, payload, c.replay)
	if err != nil {
		c.b.checkFenced(err, "catalog append")
		return fmt.Errorf("broker: writing the topic catalog (%s %s): %w", r.Op, r.Name, err)
	}
	return nil
}

// topicConfigs are the topic configs the broker understands, with defaults.
var topicConfigs = map[string]string{
	"retention.ms":           "-1",
	"retention.bytes":        "-1",
	"max.message.bytes":      "",
	"message.timestamp.type": "CreateTime",
	"cleanup.policy":         "delete",
}

// checkConfigs validates CreateTopics configs.
func checkConfigs(cfg map[string]string) (int16, string) {
	for k, v := range cfg {
		if _, ok := topicConfigs[k]; !ok {
			return kerr.InvalidConfig.Code, fmt.Sprintf("config %s is not supported (supported: retention.ms, retention.bytes, max.message.bytes, message.timestamp.type, cleanup.policy=delete)", k)
		}
		switch k {
		case "retention.ms", "retention.bytes", "max.message.bytes":
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return kerr.InvalidConfig.Code, fmt.Sprintf("config %s=%q is not an integer", k, v)
			}
		case "message.timestamp.type":
			if v != "CreateTime" && v != "LogAppendTime" {
				return kerr.InvalidConfig.Code, fmt.Sprintf("config %s=%q: want CreateTime or LogAppendTime", k, v)
			}
		case "cleanup.policy":
			if v != "delete" {
				return kerr.InvalidConfig.Code, fmt.Sprintf("config %s=%q: only delete is supported (no compaction)", k, v)
			}
		}
	}
	return 0, ""
}

// create creates a topic: catalog record first (durable), then its
// partitions' streams.
func (c *catalog) create(ctx context.Context, name string, n int32, cfg map[string]string, validateOnly bool) (*topic, int16, string) {
	if err := validName(name); err != nil {
		return nil, kerr.InvalidTopicException.Code, fmt.Sprintf("topic %q: %v", name, err)
	}
	if n == -1 {
		n = c.b.cfg.DefaultPartitions
	}
	if n <= 0 {
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("topic %s: %d partitions", name, n)
	}
	if code, msg := c.checkPerTopic(name, n); code != 0 {
		return nil, code, msg
	}
	if code, msg := checkConfigs(cfg); code != 0 {
		return nil, code, msg
	}
	if c.b.fenced.Load() {
		return nil, kerr.NotController.Code, "this broker was fenced by a newer one"
	}
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if c.lookup(name) != nil {
		return nil, kerr.TopicAlreadyExists.Code, fmt.Sprintf("topic %s already exists", name)
	}
	if code, msg := c.checkTotal(name, n); code != 0 {
		return nil, code, msg
	}
	if validateOnly {
		return nil, 0, ""
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	r := catalogRecord{Op: "create", Name: name, ID: hex.EncodeToString(id[:]), Partitions: n, Configs: cfg}
	if err := c.appendRecord(ctx, r); err != nil {
		if errors.Is(err, cluster.ErrTopicExists) {
			return nil, kerr.TopicAlreadyExists.Code, fmt.Sprintf("topic %s already exists", name)
		}
		return nil, kerr.KafkaStorageError.Code, err.Error()
	}
	_ = c.apply(r)
	t := c.lookup(name)
	if c.b.cl != nil {
		// The owners the controller assigns open the partitions.
		c.b.log.Info("topic created", "topic", name, "partitions", n, "driver", t.driver)
		return t, 0, ""
	}
	if err := c.b.keepFailed(openPartitions(ctx, t.parts)); err != nil {
		return t, kerr.KafkaStorageError.Code, err.Error()
	}
	c.b.log.Info("topic created", "topic", name, "partitions", n, "driver", t.driver)
	return t, 0, ""
}

// checkPerTopic checks a topic's partition count n against
// MaxPartitionsPerTopic.
func (c *catalog) checkPerTopic(name string, n int32) (int16, string) {
	if limit := c.b.cfg.MaxPartitionsPerTopic; n > limit {
		return kerr.InvalidPartitions.Code, fmt.Sprintf("topic %s: %d partitions is over the broker's limit of %d per topic (max_partitions_per_topic)", name, n, limit)
	}
	return 0, ""
}

// checkTotal checks that adding n partitions (for topic name) keeps the
// cluster within MaxPartitions (adminMu held).
func (c *catalog) checkTotal(name string, n int32) (int16, string) {
	c.mu.RLock()
	total := 0
	for _, t := range c.topics {
		total += len(t.parts)
	}
	c.mu.RUnlock()
	if limit := c.b.cfg.MaxPartitions; total+int(n) > limit {
		return kerr.PolicyViolation.Code, fmt.Sprintf("topic %s: %d more partitions would make %d in the cluster, over the broker's limit of %d (max_partitions)", name, n, total+int(n), limit)
	}
	return 0, ""
}

// adminTopic returns an existing topic for an admin change (adminMu held),
// or the error code and message to answer with.
func (c *catalog) adminTopic(name string) (*topic, int16, string) {
	if c.b.fenced.Load() {
		return nil, kerr.NotController.Code, "this broker was fenced by a newer one"
	}
	t := c.lookup(name)
	if t == nil {
		return nil, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %s does not exist", name)
	}
	return t, 0, ""
}

// deleteParallelism bounds the partitions a topic deletion closes and
// deletes at once.
const deleteParallelism = 16

// remove deletes a topic: catalog record first, then its streams.
func (c *catalog) remove(ctx context.Context, name string) (int16, string) {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	t, code, msg := c.adminTopic(name)
	if t == nil {
		return code, msg
	}
	r := catalogRecord{Op: "delete", Name: name}
	if err := c.appendRecord(ctx, r); err != nil {
		return kerr.KafkaStorageError.Code, err.Error()
	}
	if c.b.cl != nil {
		// Every broker, this one too, drops the topic when its etcd watch
		// shows it gone: the owners close and delete its partitions.
		c.b.log.Info("topic deleted", "topic", name)
		return 0, ""
	}
	_ = c.apply(r)
	// Partitions close and delete a few at a time: one after another, a
	// topic of hundreds of partitions outlasted the request's timeout.
	var wg sync.WaitGroup
	sem := make(chan struct{}, deleteParallelism)
	for _, p := range t.parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = p.closeLog()
			if err := sharedlog.Delete(ctx, t.store, p.name); err != nil && !errors.Is(err, stream.ErrNotFound) {
				c.b.log.Warn("deleting partition streams failed (the topic is gone from the catalog)", "topic", name, "partition", p.index, "err", err)
			}
		}()
	}
	wg.Wait()
	if err := c.b.offsets.forgetTopic(ctx, name); err != nil {
		c.b.log.Warn("removing committed offsets of a deleted topic failed", "topic", name, "err", err)
	}
	c.b.log.Info("topic deleted", "topic", name)
	return 0, ""
}

// grow raises a topic's partition count.
func (c *catalog) grow(ctx context.Context, name string, n int32, validateOnly bool) (int16, string) {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	t, code, msg := c.adminTopic(name)
	if t == nil {
		return code, msg
	}
	have := c.numPartitions(t)
	if n <= have {
		return kerr.InvalidPartitions.Code, fmt.Sprintf("topic %s has %d partitions; %d is not more", name, have, n)
	}
	if code, msg := c.checkPerTopic(name, n); code != 0 {
		return code, msg
	}
	if code, msg := c.checkTotal(name, n-have); code != 0 {
		return code, msg
	}
	if validateOnly {
		return 0, ""
	}
	r := catalogRecord{Op: "partitions", Name: name, Partitions: n}
	if err := c.appendRecord(ctx, r); err != nil {
		return kerr.KafkaStorageError.Code, err.Error()
	}
	_ = c.apply(r)
	c.mu.RLock()
	added := append([]*partition(nil), t.parts[have:]...)
	c.mu.RUnlock()
	if c.b.cl != nil {
		return 0, "" // the assigned owners open them
	}
	if err := c.b.keepFailed(openPartitions(ctx, added)); err != nil {
		return kerr.KafkaStorageError.Code, err.Error()
	}
	return 0, ""
}

// close closes every partition (final checkpoints) and the catalog stream.
func (c *catalog) close() error {
	var parts []*partition
	c.mu.RLock()
	for _, t := range c.topics {
		parts = append(parts, t.parts...)
	}
	c.mu.RUnlock()
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.closeLog() }()
	}
	wg.Wait()
	if c.s == nil {
		return nil
	}
	return c.s.Close()
}
