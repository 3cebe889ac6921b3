package broker

import (
	"context"
	"sync"
)

// byteBudget bounds bytes held in memory across requests. A holder that
// holds nothing yet may wait for room (acquire); one that already holds
// some may only take what is free (tryAcquire), so that no request waits
// while holding bytes another waits for.
type byteBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	peak  int64
	freed chan struct{} // closed and replaced when bytes are released
}

func newByteBudget(limit int64) *byteBudget {
	return &byteBudget{limit: limit, freed: make(chan struct{})}
}

// acquire takes n bytes, waiting until they fit (or nothing is held at
// all, so that a request larger than the limit still runs alone) or ctx
// ends.
func (m *byteBudget) acquire(ctx context.Context, n int64) error {
	for {
		m.mu.Lock()
		if m.used == 0 || m.used+n <= m.limit {
			m.take(n)
			m.mu.Unlock()
			return nil
		}
		ch := m.freed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tryAcquire takes n bytes if they fit now.
func (m *byteBudget) tryAcquire(n int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used+n > m.limit {
		return false
	}
	m.take(n)
	return true
}

// force takes n bytes whether they fit or not: bytes already read that
// the caller cannot give back (a first batch larger than its reservation).
func (m *byteBudget) force(n int64) {
	m.mu.Lock()
	m.take(n)
	m.mu.Unlock()
}

func (m *byteBudget) take(n int64) {
	m.used += n
	m.peak = max(m.peak, m.used)
}

// release gives n bytes back.
func (m *byteBudget) release(n int64) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	m.used -= n
	close(m.freed)
	m.freed = make(chan struct{})
	m.mu.Unlock()
}

// stats returns the bytes held now and the most ever held at once.
func (m *byteBudget) stats() (used, peak int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used, m.peak
}
