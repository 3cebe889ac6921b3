package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/stream"
)

// Restart delays of a Supervisor: the first restart waits
// DefaultRestartDelay (or WithRestartDelay), each failed attempt doubles
// the wait up to maxRestartDelay.
const (
	DefaultRestartDelay = 500 * time.Millisecond
	maxRestartDelay     = 30 * time.Second
)

// restartStartTimeout bounds one restart attempt (start and OpenStore).
const restartStartTimeout = time.Minute

// WithRestartDelay sets how long a Supervisor waits before restarting a
// driver process that died (default DefaultRestartDelay); failed attempts
// double it up to 30 seconds.
func WithRestartDelay(d time.Duration) Option {
	return func(o *options) { o.restartDelay = d }
}

// Supervisor is a stream.DriverStore (wrap it with stream.NewStore) of a
// store in a driver process that it restarts when
// the process dies: after the restart delay it starts the binary again and
// reopens the store with the same config, retrying with back-off. While the
// driver is down every call fails at once with stream.ErrUnavailable naming
// the exit. Streams opened before a crash stay failed (their calls give
// stream.ErrUnavailable); their owner reopens them on the Supervisor, at
// the same epoch if it likes. DriverUp and DriverRestarts report the
// driver's health (a broker's readiness and metrics read them).
type Supervisor struct {
	binary string
	config []byte
	opts   []Option
	delay  time.Duration
	logger *slog.Logger
	info   stream.Info

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	done   chan struct{} // the supervising goroutine has returned

	mu      sync.Mutex
	store   *hostStore // nil while the driver is down
	downErr error      // why the driver is down
	closed  bool

	restarts atomic.Int64
}

var (
	_ stream.DriverStore   = (*Supervisor)(nil)
	_ stream.StatsReporter = (*Supervisor)(nil)
)

// OpenSupervised starts the driver binary and opens a Store on it from
// config, as Open does, and restarts the driver whenever its process dies
// until Close. A driver that cannot be started or refuses config at first
// is an error, as with Open; later restarts are retried until Close.
func OpenSupervised(ctx context.Context, binary string, config []byte, opts ...Option) (*Supervisor, error) {
	o := options{logger: slog.Default(), restartDelay: DefaultRestartDelay}
	for _, opt := range opts {
		opt(&o)
	}
	st, err := open(ctx, binary, config, opts...)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{
		binary: binary, config: config, opts: opts, delay: o.restartDelay, logger: o.logger,
		info: st.Info(), store: st, done: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.supervise()
	return s, nil
}

// supervise waits for the driver process to die and restarts it, until
// Close.
func (s *Supervisor) supervise() {
	defer close(s.done)
	for {
		s.mu.Lock()
		cur := s.store
		s.mu.Unlock()
		if cur == nil {
			return // closed
		}
		select {
		case <-s.ctx.Done():
			return
		case <-cur.c.Exited():
		}
		if cur.c.isClosed() {
			return // closed on purpose (Close, CleanupClients)
		}
		down := cur.c.exitErr("driver")
		s.mu.Lock()
		s.store, s.downErr = nil, down
		s.mu.Unlock()
		_ = cur.Close()
		s.logger.Error("strata driver process died; restarting it", "binary", filepath.Base(s.binary), "pid", cur.c.Pid(), "status", cur.c.exitMsg, "restart_in", s.delay)
		st, ok := s.restart()
		if !ok {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = st.Close()
			return
		}
		s.store, s.downErr = st, nil
		s.mu.Unlock()
		n := s.restarts.Add(1)
		s.logger.Info("strata driver restarted", "binary", filepath.Base(s.binary), "pid", st.c.Pid(), "restarts", n)
	}
}

// restart starts the driver again with back-off until it works or the
// Supervisor is closed.
func (s *Supervisor) restart() (*hostStore, bool) {
	delay := s.delay
	for attempt := 1; ; attempt++ {
		select {
		case <-s.ctx.Done():
			return nil, false
		case <-time.After(delay):
		}
		ctx, cancel := context.WithTimeout(s.ctx, restartStartTimeout)
		st, err := open(ctx, s.binary, s.config, s.opts...)
		cancel()
		if err == nil {
			return st, true
		}
		if s.ctx.Err() != nil {
			return nil, false
		}
		delay = min(2*delay, maxRestartDelay)
		s.logger.Warn("restarting strata driver failed; retrying", "binary", filepath.Base(s.binary), "attempt", attempt, "retry_in", delay, "error", err)
		s.mu.Lock()
		s.downErr = fmt.Errorf("%w: driver %s is down; restart attempt %d failed: %w", stream.ErrUnavailable, filepath.Base(s.binary), attempt, err)
		s.mu.Unlock()
	}
}

// current returns the store of the running driver, or the error to fail
// with while it is down or after Close.
func (s *Supervisor) current(what string) (*hostStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, fmt.Errorf("%w: %s: supervised driver %s was closed", stream.ErrClosed, what, filepath.Base(s.binary))
	case s.store == nil:
		return nil, fmt.Errorf("%s: restarting: %w", what, s.downErr)
	}
	return s.store, nil
}

// DriverUp reports whether the driver process is running with its store
// open.
func (s *Supervisor) DriverUp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store != nil && !s.closed
}

// DriverRestarts is how many times the driver process was restarted.
func (s *Supervisor) DriverRestarts() int64 { return s.restarts.Load() }

// Client is the running driver process, nil while it is down.
func (s *Supervisor) Client() *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store == nil {
		return nil
	}
	return s.store.c
}

// Info is the driver's Info as its first process reported it.
func (s *Supervisor) Info() stream.Info { return s.info }

// Create creates a stream on the running driver.
func (s *Supervisor) Create(ctx context.Context, name string) error {
	st, err := s.current(fmt.Sprintf("create stream %q", name))
	if err != nil {
		return err
	}
	return st.Create(ctx, name)
}

// Open opens a stream on the running driver; the stream fails with
// stream.ErrUnavailable if this driver process dies.
func (s *Supervisor) Open(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	st, err := s.current(fmt.Sprintf("open stream %q", name))
	if err != nil {
		return nil, err
	}
	return st.Open(ctx, name, opts)
}

// Delete deletes a stream on the running driver.
func (s *Supervisor) Delete(ctx context.Context, name string) error {
	st, err := s.current(fmt.Sprintf("delete stream %q", name))
	if err != nil {
		return err
	}
	return st.Delete(ctx, name)
}

// List lists streams on the running driver.
func (s *Supervisor) List(ctx context.Context, prefix string) ([]string, error) {
	st, err := s.current(fmt.Sprintf("list streams with prefix %q", prefix))
	if err != nil {
		return nil, err
	}
	return st.List(ctx, prefix)
}

// BackendStats implements stream.StatsReporter for the running driver
// process (its counts start at zero after a restart).
func (s *Supervisor) BackendStats(ctx context.Context) (stream.RequestStats, error) {
	st, err := s.current("backend request stats")
	if err != nil {
		return stream.RequestStats{}, err
	}
	return st.BackendStats(ctx)
}

// Close stops supervising, closes the store and stops the driver process.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("%w: supervised driver %s", stream.ErrClosed, filepath.Base(s.binary))
	}
	s.closed = true
	st := s.store
	s.store = nil
	s.mu.Unlock()
	s.cancel()
	var err error
	if st != nil {
		err = st.Close()
		if errors.Is(err, stream.ErrUnavailable) {
			err = nil // it died as it was closed
		}
	}
	<-s.done
	return err
}
