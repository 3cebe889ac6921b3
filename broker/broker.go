package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/internal/cluster"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/stream"
)

// Route sends the partitions of the topics whose names start with Prefix to
// Store instead of the default store.
type Route struct {
	// Prefix is the topic-name prefix ("" matches every topic).
	Prefix string
	// Driver names the store in logs and metrics.
	Driver string
	// Store holds the matching topics' partitions.
	Store *stream.Store
}

// Config configures a Broker. Store and Advertise are required; every other
// zero value means its default.
type Config struct {
	// Cluster is the cluster name: the prefix of every stream the broker
	// uses. Two brokers with the same Cluster on the same storage are the
	// same cluster (the newer one takes over). Default "strata".
	Cluster string
	// Store is the default store: it holds the cluster's own streams
	// (catalog, offsets, producer ids) and every topic no Route matches.
	Store *stream.Store
	// Driver names the default store in logs and metrics (default the
	// store's Info().Driver).
	Driver string
	// Routes send topics to other stores by name prefix; the first match
	// wins.
	Routes []Route
	// Advertise is the HOST:PORT clients are told to connect to (Metadata,
	// FindCoordinator).
	Advertise string
	// MaxRequestBytes is the largest request frame accepted; a size prefix
	// above it closes the connection before anything is allocated.
	// Default 100 MiB (Kafka's socket.request.max.bytes).
	MaxRequestBytes int
	// MaxConnections caps the open client connections: a connection
	// accepted while that many are open is closed at once, before anything
	// is read from it (Kafka's max.connections). Default 10000.
	MaxConnections int
	// MaxConnectionsPerIP caps the open connections of one client address:
	// a connection over it is closed at once (Kafka's
	// max.connections.per.ip). Default 1000.
	MaxConnectionsPerIP int
	// IdleTimeout closes a connection that sent no request and had no
	// response pending or written for that long (Kafka's
	// connections.max.idle.ms). Default 10 minutes.
	IdleTimeout time.Duration
	// RequestTimeout bounds how long the rest of a request may take to
	// arrive once its first byte did, and how long a response may take to
	// be written; past it the connection is closed. Default 60s.
	RequestTimeout time.Duration
	// FetchMaxBytes caps the record bytes of one Fetch response whatever
	// the client asks (Kafka's fetch.max.bytes); as in Kafka, the first
	// batch is returned whole even when larger. Default 55 MiB.
	FetchMaxBytes int
	// FetchMemoryBytes bounds the record bytes of Fetch responses held in
	// memory at once across all connections (read and not yet written): a
	// fetch over it returns what fits, or waits for room when it holds
	// nothing yet. Default 256 MiB.
	FetchMemoryBytes int
	// MaxFetchSessions bounds the incremental fetch sessions (KIP-227) the
	// broker keeps across connections (Kafka's
	// max.incremental.fetch.session.cache.slots); a fetch over it is
	// answered without a session. Default 1000; negative: no sessions.
	MaxFetchSessions int
	// MaxPartitionsPerTopic caps a topic's partition count at
	// CreateTopics, CreatePartitions and auto-creation (INVALID_PARTITIONS
	// over it). Default 10000.
	MaxPartitionsPerTopic int32
	// MaxPartitions caps the partitions of all topics together
	// (POLICY_VIOLATION over it). Default 50000.
	MaxPartitions int
	// AutoCreateTopics creates a topic a Metadata request asks for with
	// AllowAutoTopicCreation (Kafka's auto.create.topics.enable). The
	// default (false) is kept unless set.
	AutoCreateTopics bool
	// DefaultPartitions is the partition count of auto-created topics and
	// of CreateTopics with NumPartitions -1. Default 1.
	DefaultPartitions int32
	// GroupInitialRebalanceDelay is how long a new group's first rebalance
	// waits for more members (group.initial.rebalance.delay.ms). Default
	// 300ms.
	GroupInitialRebalanceDelay time.Duration
	// FenceCheckInterval is how often the broker checks whether a newer
	// broker took over the cluster. Default 2s.
	FenceCheckInterval time.Duration
	// Security holds the SASL users, the ACL settings and the handshake
	// timeout of secured listeners (ServeListener). The zero value: no
	// SASL users, no authorization (every request allowed).
	Security Security
	// Membership, when set, makes the broker one of a cluster coordinated
	// by etcd: it serves the partitions and the group offsets assigned to
	// it, each opened at the epoch of its assignment, and keeps the topic
	// catalog in etcd. Nil (the default): one broker serves the cluster.
	Membership *cluster.Member
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Metrics collects Prometheus metrics (default a new Metrics).
	Metrics *Metrics
}

// Broker is one stateless broker of a cluster: it owns every partition of
// the cluster at its epoch until a newer broker fences it.
type Broker struct {
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
	epoch   int32
	nodeID  int32
	host    string
	port    int32

	catalog *catalog
	offsets *offsetStore
	groups  *groupCoordinator
	pids    *producerIDs
	notify  *notifier
	sasl    *saslUsers // nil: no SASL users
	acls    *aclStore  // nil: authorization off

	fenced atomic.Bool
	closed atomic.Bool
	// superseded is closed, and fencedBy set, once the broker knows it
	// was fenced (watchFence).
	superseded chan struct{}
	fencedBy   *SupersededError
	fenceKick  chan struct{}

	// cl is the cluster state when cfg.Membership is set (nil: a single
	// broker).
	cl *clusterState

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// fetchMem holds the record bytes of Fetch responses in memory.
	fetchMem *byteBudget
	// bodyMem holds request bodies allocated at their declared size
	// while their bytes arrive (readBody).
	bodyMem *byteBudget
	// fetchSessions counts the incremental fetch sessions of all
	// connections (fetchsession.go).
	fetchSessions atomic.Int64
	// sessionPartitions counts the partitions of all fetch sessions.
	sessionPartitions atomic.Int64

	connMu sync.Mutex
	conns  map[net.Conn]struct{}
	perIP  map[string]int // open connections by client address
	lns    map[net.Listener]struct{}
}

// New takes over the cluster on cfg.Store: it allocates a broker epoch above
// every earlier broker's, loads the topic catalog and the committed offsets,
// and opens every partition at that epoch (fencing the previous broker).
// Serve then answers clients. A partition that fails to open for a reason
// of its own (corrupt data) does not fail New: it answers
// KAFKA_STORAGE_ERROR while it is reopened in the background. New fails
// when a newer broker fenced it (a *SupersededError), and when no
// partition of a store could be opened because the store is unavailable.
func New(ctx context.Context, cfg Config) (*Broker, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("broker: Config.Store is required: %w", stream.ErrInvalidArgument)
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "strata"
	}
	if err := validName(cfg.Cluster); err != nil {
		return nil, fmt.Errorf("broker: Config.Cluster %q: %v: %w", cfg.Cluster, err, stream.ErrInvalidArgument)
	}
	host, portStr, err := net.SplitHostPort(cfg.Advertise)
	if err != nil {
		return nil, fmt.Errorf("broker: Config.Advertise %q: %v: %w", cfg.Advertise, err, stream.ErrInvalidArgument)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("broker: Config.Advertise %q: bad port: %w", cfg.Advertise, stream.ErrInvalidArgument)
	}
	if cfg.Driver == "" {
		cfg.Driver = cfg.Store.Info().Driver
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 10000
	}
	orDefault(&cfg.MaxConnectionsPerIP, 1000)
	orDefault(&cfg.IdleTimeout, 10*time.Minute)
	orDefault(&cfg.RequestTimeout, 60*time.Second)
	orDefault(&cfg.FetchMaxBytes, 55<<20)
	orDefault(&cfg.FetchMemoryBytes, 256<<20)
	if cfg.MaxFetchSessions == 0 {
		cfg.MaxFetchSessions = 1000
	}
	orDefault(&cfg.MaxPartitionsPerTopic, 10000)
	orDefault(&cfg.MaxPartitions, 50000)
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.GroupInitialRebalanceDelay <= 0 {
		cfg.GroupInitialRebalanceDelay = 300 * time.Millisecond
	}
	if cfg.FenceCheckInterval <= 0 {
		cfg.FenceCheckInterval = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	orDefault(&cfg.Security.HandshakeTimeout, handshakeTimeout)
	sasl, err := newSASLUsers(cfg.Security.SASL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, stream.ErrInvalidArgument)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	bctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics,
		host: host, port: int32(port),
		notify:     newNotifier(),
		sasl:       sasl,
		superseded: make(chan struct{}), fenceKick: make(chan struct{}, 1),
		ctx: bctx, cancel: cancel,
		fetchMem: newByteBudget(int64(cfg.FetchMemoryBytes)),
		bodyMem:  newByteBudget(bodyMemBytes),
		conns:    map[net.Conn]struct{}{}, perIP: map[string]int{}, lns: map[net.Listener]struct{}{},
	}
	if cfg.Membership != nil {
		return b.startClustered(ctx)
	}
	first, err := sharedlog.AllocateProducerIDs(ctx, cfg.Store, b.streamName("__brokers"), 1)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("broker: cluster %s: allocating the broker epoch on %s: %w", cfg.Cluster, cfg.Driver, err)
	}
	if first+1 > 1<<31-1 {
		cancel()
		return nil, fmt.Errorf("broker: cluster %s: broker epoch %d overflows int32", cfg.Cluster, first+1)
	}
	b.epoch = int32(first + 1)
	b.nodeID = b.epoch
	b.log = b.log.With("cluster", cfg.Cluster, "epoch", b.epoch)
	b.pids = &producerIDs{store: cfg.Store, name: b.streamName("__producer_ids")}
	start := time.Now()
	// The committed offsets load while the catalog and its partitions
	// open: on an object store each open is a chain of requests.
	offsetsDone := make(chan error, 1)
	go func() {
		var err error
		b.offsets, err = openOffsetStore(ctx, b)
		offsetsDone <- err
	}()
	b.catalog, err = openCatalog(ctx, b)
	if err == nil {
		if err = b.catalog.openAll(ctx); err != nil {
			b.catalog.close()
		}
	}
	if oerr := <-offsetsDone; oerr != nil {
		if err == nil {
			b.catalog.close()
		}
		err = cmp.Or(err, oerr)
	} else if err != nil {
		b.offsets.close()
	}
	if err != nil {
		cancel()
		b.wg.Wait() // the reopens of partitions that failed to open
		return nil, b.startErr(ctx, err)
	}
	if cfg.Security.ACL.Enabled {
		if b.acls, err = openACLs(ctx, b); err != nil {
			b.catalog.close()
			b.offsets.close()
			cancel()
			b.wg.Wait()
			return nil, b.startErr(ctx, err)
		}
	}
	b.groups = newGroupCoordinator(b)
	b.log.Info("broker took over the cluster", "topics", b.catalog.count(), "driver", cfg.Driver, "took", time.Since(start).Round(time.Millisecond))
	if s := failedSummary(b.failedPartitions()); s != "" {
		b.log.Warn("broker serving with partitions that failed to open", "failed", s)
	}
	b.wg.Add(1)
	go b.watchFence()
	return b, nil
}

// orDefault sets *v to def when it is zero or negative (unset).
func orDefault[T int | int32 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Epoch is the broker epoch: the leader epoch of every partition it opened
// and its node id.
func (b *Broker) Epoch() int32 { return b.epoch }

// Ready reports whether the broker serves its partitions: false once it was
// fenced by a newer broker or closed, and while a driver is down (see
// DriverHealth). Partitions that failed to open leave it true (/readyz
// names them, strata_broker_partitions_failed counts them).
func (b *Broker) Ready() bool { return b.notReady() == "" }

// Fenced reports whether a newer broker took over the cluster.
func (b *Broker) Fenced() bool { return b.fenced.Load() }

// Superseded returns a channel that is closed once the broker knows that a
// newer broker took over the cluster; Err then says which. A fenced broker
// keeps its listeners (Produce and Fetch answer NOT_LEADER_OR_FOLLOWER,
// Metadata no leader) until Close: a process should close it and exit, as
// strata serve does, so that clients go back to their bootstrap address.
func (b *Broker) Superseded() <-chan struct{} { return b.superseded }

// Err is nil until Superseded is closed, then a *SupersededError.
func (b *Broker) Err() error {
	select {
	case <-b.superseded:
		return b.fencedBy
	default:
		return nil
	}
}

// SupersededError says that a newer broker took over the cluster: while
// this one was starting (New returns it) or while it served (Err).
type SupersededError struct {
	// Cluster is the cluster name.
	Cluster string
	// Epoch is this broker's epoch.
	Epoch int32
	// Newer is the newest broker epoch allocated on the cluster (0 when
	// the store could not tell).
	Newer int32
	// Starting is true when the takeover happened during New.
	Starting bool
	// Err is the storage error that showed the fence.
	Err error
}

func (e *SupersededError) Error() string {
	by := "another broker"
	if e.Newer > e.Epoch {
		by = fmt.Sprintf("another broker (epoch %d)", e.Newer)
	}
	if e.Starting {
		return fmt.Sprintf("%s took over cluster %s while this broker (epoch %d) was starting", by, e.Cluster, e.Epoch)
	}
	return fmt.Sprintf("%s took over cluster %s; this broker (epoch %d) no longer owns its partitions", by, e.Cluster, e.Epoch)
}

// Unwrap returns the storage error (it matches stream.ErrFenced).
func (e *SupersededError) Unwrap() error { return e.Err }

// Metrics returns the broker's metrics.
func (b *Broker) Metrics() *Metrics { return b.metrics }

func (b *Broker) streamName(s string) string { return b.cfg.Cluster + "/" + s }

// setFenced records that a newer broker owns the cluster.
func (b *Broker) setFenced(why string) {
	if b.cl != nil {
		// In a cluster a fence moves one partition, not the broker; the
		// partition that met it drops itself (fencedInCluster).
		return
	}
	if b.fenced.CompareAndSwap(false, true) {
		b.log.Warn("broker fenced: a newer broker owns the cluster; no longer serving partitions", "why", why)
		b.notify.Broadcast()
		select {
		case b.fenceKick <- struct{}{}:
		default:
		}
	}
}

// isFence reports whether err says a newer owner fenced us.
func isFence(err error) bool {
	return err != nil && (errors.Is(err, stream.ErrFenced) || sharedlog.ErrorCode(err) == 74 /* FENCED_LEADER_EPOCH */)
}

// checkFenced notes err if it says a newer owner fenced us.
func (b *Broker) checkFenced(err error, where string) {
	if isFence(err) {
		b.setFenced(where)
	}
}

// startErr is the error New returns for err: a *SupersededError when a
// newer broker took over while this one was starting.
func (b *Broker) startErr(ctx context.Context, err error) error {
	if !isFence(err) {
		return err
	}
	newer, _ := b.latestEpoch(ctx)
	return &SupersededError{Cluster: b.cfg.Cluster, Epoch: b.epoch, Newer: newer, Starting: true, Err: err}
}

// latestEpoch reads the newest broker epoch allocated on the cluster (0
// when the store cannot open streams read-only), on a session of its own.
func (b *Broker) latestEpoch(ctx context.Context) (int32, error) {
	var s *stream.Stream
	defer func() {
		if s != nil {
			_ = s.Close()
		}
	}()
	return b.refreshEpoch(ctx, &s)
}

// refreshEpoch reads the newest broker epoch on the read-only session *s,
// opened on first use and again after an error (0 when the store cannot
// open streams read-only).
func (b *Broker) refreshEpoch(ctx context.Context, s **stream.Stream) (int32, error) {
	if *s == nil {
		if !b.cfg.Store.Info().ReadOnlyOpen {
			return 0, nil
		}
		st, err := b.cfg.Store.Open(ctx, b.streamName("__brokers"), stream.OpenOptions{Mode: stream.ModeReadOnly})
		if err != nil {
			return 0, err
		}
		*s = st
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st := *s
	// A fetch at the session's end refreshes its view.
	if _, err := st.Fetch(ctx, st.NextOffset(), stream.NoEnd, 1); err != nil && !errors.Is(err, stream.ErrOffsetOutOfRange) {
		_ = st.Close()
		*s = nil
		return 0, err
	}
	return int32(min(st.NextOffset(), 1<<31-1)), nil
}

// watchFence polls the broker-epoch stream: a later allocation means a newer
// broker took over. Once fenced (by the poll or by a write), it learns the
// newest epoch and closes superseded.
func (b *Broker) watchFence() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.FenceCheckInterval)
	defer t.Stop()
	// One read-only session, refreshed by each check: opening one per
	// check cost tens of backend reads every FenceCheckInterval.
	var epochs *stream.Stream
	defer func() {
		if epochs != nil {
			_ = epochs.Close()
		}
	}()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		case <-b.fenceKick:
		}
		newer, err := b.refreshEpoch(b.ctx, &epochs)
		if err == nil && newer > b.epoch {
			b.setFenced(fmt.Sprintf("broker epoch %d allocated", newer))
		}
		if b.fenced.Load() {
			b.fencedBy = &SupersededError{Cluster: b.cfg.Cluster, Epoch: b.epoch, Newer: newer, Err: stream.ErrFenced}
			close(b.superseded)
			return
		}
	}
}

// Close stops serving, closes every connection and partition (writing their
// final checkpoints) and the cluster streams. It does not close the stores.
func (b *Broker) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	b.connMu.Lock()
	for ln := range b.lns {
		_ = ln.Close()
	}
	for c := range b.conns {
		_ = c.Close()
	}
	b.connMu.Unlock()
	b.cancel()
	b.notify.Broadcast()
	b.groups.close()
	b.wg.Wait()
	err := b.catalog.close()
	if e := b.offsets.close(); err == nil {
		err = e
	}
	if b.acls != nil {
		if e := b.acls.close(); err == nil {
			err = e
		}
	}
	b.log.Info("broker closed")
	return err
}

// validName checks a cluster or topic name: Kafka's legal characters.
func validName(s string) error {
	if s == "" || s == "." || s == ".." {
		return errors.New("empty, '.' or '..'")
	}
	if len(s) > 249 {
		return errors.New("longer than 249 characters")
	}
	if i := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}); i >= 0 {
		return fmt.Errorf("illegal character %q (legal: [a-zA-Z0-9._-])", s[i])
	}
	return nil
}

// producerIDs hands out producer ids from blocks reserved on the store.
type producerIDs struct {
	store *stream.Store
	name  string
	mu    sync.Mutex
	next  int64
	end   int64
}

const producerIDBlock = 1000

func (p *producerIDs) get(ctx context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		first, err := sharedlog.AllocateProducerIDs(ctx, p.store, p.name, producerIDBlock)
		if err != nil {
			return 0, err
		}
		p.next, p.end = first, first+producerIDBlock
	}
	id := p.next
	p.next++
	return id, nil
}
