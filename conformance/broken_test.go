package conformance_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/conformance/internal/broken"
)

// mustCatch lists, for each deliberate defect, the cases that must fail on
// it.
var mustCatch = map[broken.Kind][]string{
	broken.IgnoresFencing: {
		"fencing/higher-fences-lower", "fencing/lower-refused", "fencing/same-epoch-reopen",
		"fencing/same-epoch-reopen-same-store", "fencing/stale-writer-inflight", "fencing/ping-pong-owners",
		"linearizability/takeovers",
	},
	broken.ReordersAcks: {
		"append/pipelined-in-order", "append/pipelined-goroutines",
	},
	broken.LosesLastOnCrash: {
		"durability/crash-after-acks", "durability/crash-same-epoch", "durability/crash-repeated",
	},
	broken.FlipsByte: {
		"contract/fetch-roundtrip", "append/pipelined-in-order", "durability/crash-after-acks",
		"readonly/sees-acked", "linearizability/single-session",
	},
	broken.StaleTrim: {
		"fencing/higher-fences-lower", "fencing/fenced-trim-refused", "fencing/trim-races-fence",
	},
	broken.IgnoresSuppliedChecksum: {
		"contract/supplied-checksum",
	},
}

func caseByName(t *testing.T, name string) conformance.Case {
	t.Helper()
	i := slices.IndexFunc(conformance.Cases(), func(c conformance.Case) bool { return c.FullName() == name })
	if i < 0 {
		t.Fatalf("no case %q", name)
	}
	return conformance.Cases()[i]
}

// TestSuiteCatchesBrokenDrivers runs the cases that should catch each
// defect: they must fail on the broken driver and pass on the healthy one.
func TestSuiteCatchesBrokenDrivers(t *testing.T) {
	for _, kind := range broken.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			names := mustCatch[kind]
			if len(names) == 0 {
				t.Fatalf("no case is listed to catch %s", kind)
			}
			for _, name := range names {
				c := caseByName(t, name)
				opts := conformance.RunOptions{Seed: 1, Timeout: time.Minute}
				res := conformance.RunCase(context.Background(), broken.Harness(kind), c, opts)
				if res.Status != conformance.StatusFail {
					t.Errorf("%s on the %s driver: %s, want fail", name, kind, res.Status)
					continue
				}
				t.Logf("%s caught %s: %s", name, kind, res.Error)
				if ctl := conformance.RunCase(context.Background(), broken.Harness(broken.None), c, opts); ctl.Status != conformance.StatusPass {
					t.Errorf("%s on the healthy driver: %s (%s), want pass", name, ctl.Status, ctl.Error)
				}
			}
		})
	}
}
