package s3

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/stratastream/strata/stream"
)

// connSet tracks the TCP connections a Storage's HTTP client dialed, so
// that Close closes every one of them. CloseIdleConnections on the
// transport is not enough: the SDK's client runs on a clone of the
// transport its options see, and a connection still returning to the pool
// when Close runs would stay open, with its two goroutines, until the
// server or the idle timeout ends it.
type connSet struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}

// dialer wraps dial so that the connections it makes are tracked; after
// closeAll it refuses to dial.
func (s *connSet) dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			c.Close()
			return nil, fmt.Errorf("%w: s3 storage is closed", stream.ErrClosed)
		}
		if s.conns == nil {
			s.conns = map[*trackedConn]struct{}{}
		}
		tc := &trackedConn{Conn: c, set: s}
		s.conns[tc] = struct{}{}
		return tc, nil
	}
}

// open is the number of tracked connections not yet closed.
func (s *connSet) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// closeAll closes every tracked connection and refuses new ones.
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
