package conformance

import (
	"sync"

	"github.com/stratastream/strata/stream"
)

// WrapHarness returns a harness whose stores are wrap of h's: the suite
// then checks a layer over the driver (such as stream/wal's virtual
// streams) with the driver's own second stores and crashes underneath.
// wrap must return a Store that owns the one it is given.
func WrapHarness(h Harness, wrap func(t T, base *stream.Store) *stream.Store) Harness {
	var (
		mu    sync.Mutex
		bases = map[*stream.Store]*stream.Store{}
	)
	wrapped := func(t T, b *stream.Store) *stream.Store {
		s := wrap(t, b)
		mu.Lock()
		bases[s] = b
		mu.Unlock()
		return s
	}
	base := func(s *stream.Store) *stream.Store {
		mu.Lock()
		defer mu.Unlock()
		if b, ok := bases[s]; ok {
			return b
		}
		return s
	}
	out := h
	out.NewStore = func(t T) *stream.Store { return wrapped(t, h.NewStore(t)) }
	if h.Second != nil {
		out.Second = func(t T, s *stream.Store) *stream.Store { return wrapped(t, h.Second(t, base(s))) }
	}
	if h.Crash != nil {
		out.Crash = func(t T, s *stream.Store) *stream.Store { return wrapped(t, h.Crash(t, base(s))) }
	}
	return out
}
