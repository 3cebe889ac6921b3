package conformance_test

import (
	"context"
	"fmt"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// A driver's own test hands the suite a Harness and calls Run:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{NewStore: ..., Second: ..., Crash: ...})
//	}
//
// Outside `go test`, RunCase runs one case with the suite's own T. Here the
// contract family runs against in-process memory stores; Second and Crash
// open stores on the same memory namespace.
func Example() {
	namespaces := map[*stream.Store]string{} // which namespace each store is on
	open := func(ns string) *stream.Store {
		s := memory.New(memory.Config{Namespace: ns})
		namespaces[s] = ns
		return s
	}
	same := func(t conformance.T, s *stream.Store) *stream.Store { return open(namespaces[s]) }
	h := conformance.Harness{
		NewStore: func(t conformance.T) *stream.Store {
			return open(fmt.Sprintf("example-%d", len(namespaces)))
		},
		Second: same,
		Crash:  same,
	}
	cases, _ := conformance.Select(conformance.Cases(), "^contract/(empty-stream|fetch-mid-batch|trim-backwards-noop)$")
	for _, c := range cases {
		r := conformance.RunCase(context.Background(), h, c, conformance.RunOptions{Seed: 1})
		fmt.Printf("%s: %s\n", c.FullName(), r.Status)
	}
	// Output:
	// contract/empty-stream: pass
	// contract/fetch-mid-batch: pass
	// contract/trim-backwards-noop: pass
}
