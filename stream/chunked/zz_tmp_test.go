package chunked_test

import (
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

func TestTmpConformance(t *testing.T) {
	mem := chunked.NewMemStorage()
	open := func(t conformance.T) stream.Store {
		s, err := chunked.NewStore(mem, chunked.Options{})
		if err != nil {
			t.Fatalf("%v", err)
		}
		return s
	}
	conformance.Run(t, conformance.Harness{NewStore: open, Second: func(t conformance.T, _ stream.Store) stream.Store { return open(t) }})
}
