package sharedlogtest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

var seq atomic.Int64

// lossyStore is a deliberately broken driver: its read-only and second
// opens see a stream without its last batch, as if an acked append were
// lost.
type lossyStore struct{ stream.DriverStore }

func (s lossyStore) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := s.DriverStore.Open(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return lossyStream{st}, nil
}

type lossyStream struct{ stream.DriverStream }

func (s lossyStream) NextOffset() int64 {
	if n := s.DriverStream.NextOffset(); n > 0 && s.DriverStream.Epoch() >= 2 {
		return n - 1
	}
	return s.DriverStream.NextOffset()
}

func harness(broken bool) conformance.Harness {
	var ns atomic.Value
	wrap := func(s *stream.Store) *stream.Store {
		if broken {
			return stream.NewStore(lossyStore{s.Driver()})
		}
		return s
	}
	return conformance.Harness{
		NewStore: func(t conformance.T) *stream.Store {
			n := fmt.Sprintf("runcase-%d", seq.Add(1))
			ns.Store(n)
			return wrap(memory.New(memory.Config{Namespace: n}))
		},
		Second: func(t conformance.T, _ *stream.Store) *stream.Store {
			return wrap(memory.New(memory.Config{Namespace: ns.Load().(string)}))
		},
	}
}

// TestRunCase runs cases the way the CLI does (RunCase, outside go test):
// they pass on the memory driver, and the takeover cases fail on a driver
// that hides an acked batch from a new owner.
func TestRunCase(t *testing.T) {
	ctx := context.Background()
	var ran int
	for _, c := range sharedlogtest.Cases() {
		if c.Family != sharedlogtest.FamilyTakeover || c.Name == "crash-recovery" {
			continue
		}
		ran++
		good := sharedlogtest.RunCase(ctx, harness(false), c, conformance.RunOptions{})
		if good.Status != conformance.StatusPass {
			t.Errorf("%s on memory: %s %s", c.FullName(), good.Status, good.Error)
		}
		if good.Case.Suite != sharedlogtest.Suite || good.Case.FullName() != c.FullName() {
			t.Errorf("result names case %+v", good.Case)
		}
	}
	if ran < 5 {
		t.Fatalf("only %d takeover cases", ran)
	}
	for _, name := range []string{"fences-old-owner", "idempotent-retry", "mid-pipeline"} {
		var c sharedlogtest.Case
		for _, x := range sharedlogtest.Cases() {
			if x.Family == sharedlogtest.FamilyTakeover && x.Name == name {
				c = x
			}
		}
		bad := sharedlogtest.RunCase(ctx, harness(true), c, conformance.RunOptions{})
		if bad.Status != conformance.StatusFail {
			t.Errorf("%s on a driver that loses an acked batch: %s, want fail", c.FullName(), bad.Status)
		}
	}
}

// TestCatalogue: case names are unique, documented, and grouped by family.
func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	last := ""
	done := map[string]bool{}
	for _, c := range sharedlogtest.Cases() {
		if seen[c.FullName()] || c.Doc == "" {
			t.Fatalf("case %q is duplicated or undocumented", c.FullName())
		}
		seen[c.FullName()] = true
		if c.Family != last {
			if done[c.Family] {
				t.Fatalf("family %q is split", c.Family)
			}
			done[last], last = true, c.Family
		}
	}
	if len(seen) < 60 {
		t.Fatalf("%d cases", len(seen))
	}
}
