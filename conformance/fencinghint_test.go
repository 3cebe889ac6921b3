package conformance_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// overwritingStorage is a chunked.Storage whose PutIfAbsent overwrites: the
// defect storagetest's PutIfAbsent cases catch, which breaks the engine's
// fencing.
type overwritingStorage struct{ *chunked.MemStorage }

func (s overwritingStorage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return s.Put(ctx, key, data)
}

func (overwritingStorage) Close() error { return nil }

// TestFencingFailurePointsAtStoragetest: on the engine over a Storage whose
// put-if-absent is not exclusive, the fencing cases fail, and each failed
// one logs where to look: the Storage suite. On a sound Storage they pass.
func TestFencingFailurePointsAtStoragetest(t *testing.T) {
	harness := func(st chunked.Storage) conformance.Harness {
		open := func(t conformance.T) *stream.Store {
			s, err := chunked.NewStore(st, chunked.Options{Driver: "engine-test"})
			if err != nil {
				t.Fatalf("chunked.NewStore: %v", err)
			}
			return s
		}
		same := func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) }
		return conformance.Harness{NewStore: open, Second: same, Crash: same}
	}
	cases, err := conformance.Select(conformance.Cases(), "^(fencing/|linearizability/takeovers$)")
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	broken := harness(overwritingStorage{chunked.NewMemStorage()})
	for _, c := range cases {
		r := conformance.RunCase(t.Context(), broken, c, conformance.RunOptions{Seed: 1})
		if r.Status != conformance.StatusFail {
			continue
		}
		failed++
		log := strings.Join(r.Log, "\n")
		if !strings.Contains(log, "This store runs on the chunked engine") || !strings.Contains(log, "storagetest.Run (conformance/storagetest)") {
			t.Errorf("%s failed on a non-exclusive PutIfAbsent without pointing at storagetest:\n%s", c.FullName(), log)
		}
	}
	if failed == 0 {
		t.Fatal("no fencing case failed on a Storage whose PutIfAbsent overwrites")
	}
	t.Logf("%d of %d fencing cases failed on the overwriting Storage", failed, len(cases))
	sound := harness(nopClose{chunked.NewMemStorage()})
	for _, c := range cases {
		if r := conformance.RunCase(t.Context(), sound, c, conformance.RunOptions{Seed: 1}); r.Status != conformance.StatusPass {
			t.Errorf("%s on a sound Storage: %s %s", c.FullName(), r.Status, r.Error)
		} else if strings.Contains(strings.Join(r.Log, "\n"), "storagetest") {
			t.Errorf("%s passed but logged the storagetest hint", c.FullName())
		}
	}
}

// nopClose leaves the shared MemStorage open when a store closes.
type nopClose struct{ chunked.Storage }

func (nopClose) Close() error { return nil }
