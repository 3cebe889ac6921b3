package conformance_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// memoryHarness runs the suite on the memory driver in-process: each case
// gets a namespace of its own; Second and Crash open new stores on the same
// namespace (a crash drops the old store without Close).
func memoryHarness() conformance.Harness {
	var (
		mu  sync.Mutex
		ns  = map[stream.Store]string{}
		seq atomic.Int64
	)
	open := func(name string) stream.Store {
		s := memory.New(memory.Config{Namespace: name})
		mu.Lock()
		ns[s] = name
		mu.Unlock()
		return s
	}
	same := func(t conformance.T, s stream.Store) stream.Store {
		mu.Lock()
		name, ok := ns[s]
		mu.Unlock()
		if !ok {
			t.Fatalf("memory harness: store %p was not opened by the harness", s)
		}
		return open(name)
	}
	return conformance.Harness{
		NewStore: func(t conformance.T) stream.Store {
			return open(fmt.Sprintf("conformance-test-%d", seq.Add(1)))
		},
		Second: same,
		Crash:  same,
	}
}

func TestMemoryInProcess(t *testing.T) {
	conformance.Run(t, memoryHarness())
}
