package soak

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

func shortConfig(newStore func(context.Context, int) (*stream.Store, error)) Config {
	return Config{NewStore: newStore, Hosts: 3, Streams: 3, Owners: 4, Rounds: 6, Appends: 6, Seed: 42}
}

// engineStores returns NewStore for independent engine Stores on one
// in-memory Storage (one namespace, as separate processes would share).
func engineStores(t *testing.T) func(context.Context, int) (*stream.Store, error) {
	mem := chunked.NewMemStorage()
	return func(context.Context, int) (*stream.Store, error) {
		return chunked.NewStore(nopClose{mem}, chunked.Options{Driver: "engine"})
	}
}

// nopClose keeps the shared storage open when one engine Store closes.
type nopClose struct{ chunked.Storage }

func (nopClose) Close() error { return nil }

func TestSoakClean(t *testing.T) {
	mem, err := memory.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	cases := map[string]func(context.Context, int) (*stream.Store, error){
		"engine": engineStores(t),
		"memory": func(context.Context, int) (*stream.Store, error) {
			return stream.NewStore(unclosable{mem.Driver()}), nil
		},
	}
	for name, ns := range cases {
		t.Run(name, func(t *testing.T) {
			rep, err := Run(context.Background(), shortConfig(ns))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", *rep)
			if !rep.OK() {
				t.Fatalf("soak found problems: %q", rep.Problems)
			}
			if rep.Acked == 0 || rep.Verified != rep.Acked || rep.Fenced == 0 {
				t.Fatalf("acked %d, verified %d, fenced %d: the race did not happen", rep.Acked, rep.Verified, rep.Fenced)
			}
		})
	}
}

// unclosable shares one memory store among the soak's "hosts".
type unclosable struct{ stream.DriverStore }

func (unclosable) Close() error { return nil }

// TestSoakCatchesBrokenStores: the verifier finds a store that acks an
// append it drops, one that flips payload bytes, and one that ignores
// fencing; a same seed finds it again.
func TestSoakCatchesBrokenStores(t *testing.T) {
	cases := []struct {
		name  string
		wrap  func(stream.DriverStream) stream.DriverStream
		check func(*Report) bool
	}{
		{"acks a dropped append", func(s stream.DriverStream) stream.DriverStream { return &dropping{DriverStream: s} }, func(r *Report) bool { return r.Lost > 0 || r.Diverged > 0 }},
		{"flips a byte", func(s stream.DriverStream) stream.DriverStream { return &flipping{DriverStream: s} }, func(r *Report) bool { return r.Diverged > 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := engineStores(t)
			cfg := shortConfig(func(ctx context.Context, i int) (*stream.Store, error) {
				st, err := ns(ctx, i)
				if err != nil {
					return nil, err
				}
				return stream.NewStore(wrapStore{st.Driver(), tc.wrap}), nil
			})
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || !tc.check(rep) {
				t.Fatalf("soak missed it: %+v", *rep)
			}
			t.Logf("found: %s", strings.Join(rep.Problems[:1], "; "))
		})
	}
	t.Run("ignores fencing", func(t *testing.T) {
		// Every open uses epoch 1 underneath: the stale owners' appends are
		// acked, at offsets beyond what higher epochs opened at.
		ns := engineStores(t)
		cfg := shortConfig(func(ctx context.Context, i int) (*stream.Store, error) {
			st, err := ns(ctx, i)
			if err != nil {
				return nil, err
			}
			return stream.NewStore(unfenced{st.Driver()}), nil
		})
		rep, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || rep.Violations == 0 && rep.Lost == 0 {
			t.Fatalf("soak missed a store without fencing: %+v", *rep)
		}
	})
}

type wrapStore struct {
	stream.DriverStore
	wrap func(stream.DriverStream) stream.DriverStream
}

func (w wrapStore) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	s, err := w.DriverStore.Open(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return w.wrap(s), nil
}

// dropping acks every fifth append of a session without appending it.
type dropping struct {
	stream.DriverStream
	n atomic.Int64
}

func (d *dropping) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	if d.n.Add(1)%5 == 0 {
		f, done := stream.NewAppendFuture()
		next := d.DriverStream.NextOffset()
		done(stream.AppendResult{BaseOffset: next, NextOffset: next + int64(b.Count)}, nil)
		return f
	}
	return d.DriverStream.Append(ctx, b)
}

// flipping corrupts the payload of the third append of a session after it
// is handed over (the stream may still reference it: the bytes stored
// differ from the bytes acked).
type flipping struct {
	stream.DriverStream
	n atomic.Int64
}

func (f *flipping) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	if f.n.Add(1) == 3 {
		p := append([]byte(nil), b.Payload...)
		p[len(p)-1] ^= 0xff
		p[headerLen-1] ^= 0x01
		b.Payload = p
	}
	return f.DriverStream.Append(ctx, b)
}

// unfenced opens every read-write session at epoch 1 and never reports
// ErrFenced.
type unfenced struct{ stream.DriverStore }

func (u unfenced) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	if o.Mode == stream.ModeReadWrite {
		o.Epoch = 1
	}
	s, err := u.DriverStore.Open(ctx, name, o)
	if errors.Is(err, stream.ErrFenced) {
		return nil, errors.New("unexpected")
	}
	return s, err
}

// TestSoakDuration: a run whose Duration ran out stops starting rounds,
// verifies the rounds that ran and reports how many.
func TestSoakDuration(t *testing.T) {
	cfg := shortConfig(engineStores(t))
	cfg.Rounds = 1 << 20
	cfg.Duration = 300 * time.Millisecond
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Rounds == 0 || rep.Rounds >= cfg.Rounds || rep.Acked == 0 || rep.Verified != rep.Acked {
		t.Fatalf("rounds %d of %d, acked %d, verified %d, problems %q", rep.Rounds, cfg.Rounds, rep.Acked, rep.Verified, rep.Problems)
	}
}
