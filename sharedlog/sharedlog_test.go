package sharedlog_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

var nsSeq atomic.Int64

// memoryHarness opens memory stores on a fresh namespace per case; Second
// and Crash open another store on the same namespace.
func memoryHarness() conformance.Harness {
	var mu sync.Mutex
	ns := map[*stream.Store]string{}
	nsOf := func(s *stream.Store) string {
		mu.Lock()
		defer mu.Unlock()
		return ns[s]
	}
	open := func(t conformance.T, name string) *stream.Store {
		s := memory.New(memory.Config{Namespace: name})
		mu.Lock()
		ns[s] = name
		mu.Unlock()
		return s
	}
	return conformance.Harness{
		NewStore: func(t conformance.T) *stream.Store {
			return open(t, fmt.Sprintf("sharedlogtest-%d", nsSeq.Add(1)))
		},
		Second: func(t conformance.T, s *stream.Store) *stream.Store { return open(t, nsOf(s)) },
		Crash:  func(t conformance.T, s *stream.Store) *stream.Store { return open(t, nsOf(s)) },
	}
}

func TestSharedLogMemory(t *testing.T) { sharedlogtest.Run(t, memoryHarness()) }
