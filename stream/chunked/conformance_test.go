package chunked_test

import (
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// memHarness runs the suite on the engine over one shared MemStorage: the
// second store and the store after a "crash" (dropped without Close) are
// new engine Stores on the same storage, as another process would be.
func memHarness(opts chunked.Options) conformance.Harness {
	mem := chunked.NewMemStorage()
	open := func(t conformance.T) *stream.Store {
		s, err := chunked.NewStore(nopClose{mem}, opts)
		if err != nil {
			t.Fatalf("chunked.NewStore: %v", err)
		}
		return s
	}
	return conformance.Harness{
		NewStore: open,
		Second:   func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) },
		Crash:    func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) },
	}
}

// nopClose keeps the shared MemStorage open when one Store closes.
type nopClose struct{ *chunked.MemStorage }

func (nopClose) Close() error { return nil }

func TestConformanceMemStorage(t *testing.T) {
	conformance.Run(t, memHarness(chunked.Options{Driver: "chunked-mem"}))
}

func TestConformanceMemStorageLinger(t *testing.T) {
	conformance.Run(t, memHarness(chunked.Options{Driver: "chunked-mem", Linger: 2e6, MaxInflightChunks: 2, MaxChunkBytes: 4096}))
}
