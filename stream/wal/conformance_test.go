package wal_test

import (
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
	"github.com/stratastream/strata/stream/wal"
)

// keepOpen keeps a shared base store open when one virtual Store closes.
type keepOpen struct{ stream.Store }

func (keepOpen) Close() error { return nil }

// harness runs the suite on virtual streams over one shared base store:
// the second store and the store after a "crash" (dropped without Close)
// are new wal Stores, new writer sessions with WALs of their own, on the
// same base, as another process would be.
func harness(base stream.Store, opts wal.Options) conformance.Harness {
	open := func(t conformance.T) stream.Store {
		s, err := wal.NewStore(keepOpen{base}, opts)
		if err != nil {
			t.Fatalf("wal.NewStore: %v", err)
		}
		return s
	}
	return conformance.Harness{
		NewStore: open,
		Second:   func(t conformance.T, _ stream.Store) stream.Store { return open(t) },
		Crash:    func(t conformance.T, _ stream.Store) stream.Store { return open(t) },
	}
}

func TestConformanceMemory(t *testing.T) {
	conformance.Run(t, harness(memory.New(memory.Config{}), wal.Options{}))
}

func TestConformanceEngine(t *testing.T) {
	base, err := chunked.NewStore(chunked.NewMemStorage(), chunked.Options{Driver: "chunked-mem"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	conformance.Run(t, harness(base, wal.Options{}))
}

func TestConformanceNoLinger(t *testing.T) {
	conformance.Run(t, harness(memory.New(memory.Config{}), wal.Options{Linger: -1, MaxInflightFlushes: 1}))
}
