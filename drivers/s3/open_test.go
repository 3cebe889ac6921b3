package s3

import (
	"testing"

	"github.com/stratastream/strata/stream"
)

// TestOpenStats: the Store Open returns reports the driver's request
// counts (stream.StatsReporter), and an append costs its chunk PUT with
// no LIST.
func TestOpenStats(t *testing.T) {
	ctx := t.Context()
	store, err := Open(ctx, marshalConfig(t, minioConfig(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if info := store.Info(); info.Driver != DriverName || info.Version != Version || !info.Durable || !info.SharedNamespace {
		t.Errorf("Info %+v: want driver %q %s, durable, shared namespace", info, DriverName, Version)
	}
	sr := store
	stats := func() stream.RequestStats {
		t.Helper()
		v, err := sr.BackendStats(ctx)
		if err != nil {
			t.Fatalf("BackendStats: %v", err)
		}
		return v
	}
	if got := stats(); got.Gets != 1 || got.Puts != 0 {
		t.Errorf("after Open: %+v, want the one probe GET", got)
	}
	s, err := store.Open(ctx, "stats/s", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := stats()
	if _, err := stream.Append(ctx, s, stream.Batch{Count: 1, Payload: make([]byte, 5000)}); err != nil {
		t.Fatal(err)
	}
	d := stats().Sub(before)
	if d.Puts != 1 || d.Lists != 0 || d.BytesWritten < 5000 {
		t.Errorf("one append made %+v; want 1 PUT of at least 5000 bytes and no LIST", d)
	}
}
