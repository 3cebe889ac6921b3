package drivertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/conformance/storagetest"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
	"github.com/stratastream/strata/stream/plugin"
	"github.com/stratastream/strata/stream/wal"
)

// Conformance is one driver's run of the stream conformance suite, in
// process (RunInProcess) or through its plugin binary (RunOutOfProcess).
type Conformance struct {
	// Driver names the driver: its plugin binary is built from
	// drivers/DRIVER/cmd/strata-driver-DRIVER and its stores must report
	// it as Info.Driver, durable and with a shared namespace.
	Driver string
	// Open is the driver's stream.Opener, for stores in this process.
	Open stream.Opener
	// Config is the config document of every store of the run.
	Config []byte
	// BackendCtl is the fault family's hook (see BackendCtl).
	BackendCtl string
	// UnavailableWithin bounds the fault family's wait for
	// stream.ErrUnavailable (0: the suite's default).
	UnavailableWithin time.Duration
}

// plugin returns the out-of-process harness: every store is a driver
// process of its own (so Second races two processes) and a crash is
// SIGKILL. It fails t when the driver does not start or refuses Config.
func (c Conformance) plugin(t *testing.T) conformance.Harness {
	t.Helper()
	bin := PluginBinary(t, c.Driver)
	h, info, err := conformance.PluginHarness(context.Background(), bin, c.Config, plugin.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("%s PluginHarness: %v", c.Driver, err)
	}
	if info.Driver != c.Driver || !info.Durable || !info.SharedNamespace {
		t.Fatalf("plugin Info %+v: want driver %q, durable, shared namespace", info, c.Driver)
	}
	h.BackendCtl = c.BackendCtl
	h.UnavailableWithin = c.UnavailableWithin
	return h
}

// InProcess returns the in-process harness: stores are opened by Open in
// this process, the second writer or reader of the fencing and read-only
// cases is a driver process of its own, and a crash drops the Store
// without Close (its goroutines go on as a stale writer) and opens a new
// one. It is RunInProcess's harness, for a driver that runs a selection of
// cases with a hook of its own.
func (c Conformance) InProcess(t *testing.T) conformance.Harness {
	h := c.plugin(t)
	out := h.NewStore
	open := func(t conformance.T) *stream.Store {
		t.Helper()
		s, err := c.Open(t.Context(), c.Config)
		if err != nil {
			t.Fatalf("%s.Open: %v", c.Driver, err)
		}
		return s
	}
	h.NewStore = open
	h.Second = func(t conformance.T, _ *stream.Store) *stream.Store { return out(t) }
	h.Crash = func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) }
	h.CrashKillsProcess = false
	return h
}

// RunInProcess runs the suite on the driver linked in (see InProcess).
func (c Conformance) RunInProcess(t *testing.T) {
	conformance.Run(t, c.InProcess(t))
}

// RunOutOfProcess runs the suite on the plugin binary: every store is its
// own driver process, and a crash is SIGKILL.
func (c Conformance) RunOutOfProcess(t *testing.T) {
	conformance.Run(t, c.plugin(t))
}

// RunStorage runs the chunked.Storage suite (storagetest.Run, with
// put-if-absent races between OS processes) on the Storage that open
// returns for each config newConfig makes.
func RunStorage[S chunked.Storage](t *testing.T, open func(context.Context, []byte) (S, error), newConfig func(t *testing.T) []byte) {
	storagetest.Run(t, storagetest.Harness{
		Open: func(ctx context.Context, config []byte) (chunked.Storage, error) {
			st, err := open(ctx, config)
			if err != nil {
				return nil, err
			}
			return st, nil
		},
		NewConfig: newConfig,
	})
}

// RunStreamSets runs the stream suite and the SharedLog suite on virtual
// streams (stream/wal, strata serve's default) over the driver linked in,
// with second stores in driver processes of their own (see InProcess).
func (c Conformance) RunStreamSets(t *testing.T) {
	h := conformance.WrapHarness(c.InProcess(t), func(t conformance.T, base *stream.Store) *stream.Store {
		s, err := wal.NewStore(base, wal.Options{})
		if err != nil {
			t.Fatalf("wal.NewStore: %v", err)
		}
		return stream.NewStore(s)
	})
	t.Run("stream", func(t *testing.T) { conformance.Run(t, h) })
	t.Run("sharedlog", func(t *testing.T) { sharedlogtest.Run(t, h) })
}
