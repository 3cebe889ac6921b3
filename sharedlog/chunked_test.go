package sharedlog_test

import (
	"sync"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// sharedStorage lets several chunked stores use one MemStorage: closing a
// store does not close the storage the others use.
type sharedStorage struct{ chunked.Storage }

func (sharedStorage) Close() error { return nil }

// chunkedHarness runs the engine on an in-memory Storage; Second and Crash
// open another engine Store on the same Storage (a crash abandons the old
// store without Close).
func chunkedHarness() conformance.Harness {
	var mu sync.Mutex
	storages := map[*stream.Store]chunked.Storage{}
	open := func(t conformance.T, st chunked.Storage) *stream.Store {
		s, err := chunked.NewStore(sharedStorage{st}, chunked.Options{})
		if err != nil {
			t.Fatalf("chunked store: %v", err)
		}
		mu.Lock()
		storages[s] = st
		mu.Unlock()
		return s
	}
	of := func(s *stream.Store) chunked.Storage {
		mu.Lock()
		defer mu.Unlock()
		return storages[s]
	}
	return conformance.Harness{
		NewStore: func(t conformance.T) *stream.Store { return open(t, chunked.NewMemStorage()) },
		Second:   func(t conformance.T, s *stream.Store) *stream.Store { return open(t, of(s)) },
		Crash:    func(t conformance.T, s *stream.Store) *stream.Store { return open(t, of(s)) },
	}
}

func TestSharedLogChunked(t *testing.T) { sharedlogtest.Run(t, chunkedHarness()) }
