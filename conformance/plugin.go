package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
)

// PluginHarness returns a Harness that runs a driver out-of-process: its
// plugin binary, loaded through stream/plugin, with config as the driver's
// config document. It starts the binary once first to check that it is a
// Strata driver that accepts config, and returns the driver's Info; an
// error there means bad input (not a driver, wrong protocol version, bad
// config), not a failed case.
//
// Each case gets a driver process of its own. Second opens the second store
// in another process when the driver declares SharedNamespace, else on the
// same process (a memory namespace lives in one process). Crash SIGKILLs
// the process when the driver declares Durable and starts a new one; for a
// non-durable driver it drops the store without Close on the live process
// (killing it would lose the data by design).
func PluginHarness(ctx context.Context, binary string, config []byte, opts ...plugin.Option) (Harness, stream.Info, error) {
	// The check is quiet: its failure is the returned error.
	quiet := append(slices.Clone(opts), plugin.WithLogger(slog.New(slog.DiscardHandler)))
	c, err := plugin.Start(ctx, binary, quiet...)
	if err != nil {
		return Harness{}, stream.Info{}, err
	}
	defer c.Close()
	s, err := c.OpenStore(ctx, config)
	if err != nil {
		return Harness{}, stream.Info{}, fmt.Errorf("driver %s refused its config: %w", binary, err)
	}
	info := s.Info()
	_ = s.Close()

	p := &pluginHarness{binary: binary, config: config, opts: opts, info: info, clients: map[*stream.Store]*plugin.Client{}}
	return Harness{
		NewStore:          p.newStore,
		Second:            p.second,
		Crash:             p.crash,
		CrashKillsProcess: info.Durable,
	}, info, nil
}

type pluginHarness struct {
	binary string
	config []byte
	opts   []plugin.Option
	info   stream.Info

	mu      sync.Mutex
	clients map[*stream.Store]*plugin.Client
}

// start runs a driver process for the case; it is closed when the case
// ends.
func (p *pluginHarness) start(t T) *plugin.Client {
	t.Helper()
	c, err := plugin.Start(t.Context(), p.binary, p.opts...)
	if err != nil {
		t.Fatalf("start driver %s: %v", p.binary, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// open opens a store on c and remembers which process it lives in.
func (p *pluginHarness) open(t T, c *plugin.Client) *stream.Store {
	t.Helper()
	s, err := c.OpenStore(t.Context(), p.config)
	if err != nil {
		t.Fatalf("open store on driver process %d: %v", c.Pid(), err)
	}
	p.mu.Lock()
	p.clients[s] = c
	p.mu.Unlock()
	t.Cleanup(func() {
		p.mu.Lock()
		delete(p.clients, s)
		p.mu.Unlock()
	})
	return s
}

func (p *pluginHarness) clientOf(t T, s *stream.Store) *plugin.Client {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[s]
	if !ok {
		t.Fatalf("plugin harness: store %p was not opened by the harness", s)
	}
	return c
}

func (p *pluginHarness) newStore(t T) *stream.Store {
	t.Helper()
	return p.open(t, p.start(t))
}

func (p *pluginHarness) second(t T, s *stream.Store) *stream.Store {
	t.Helper()
	if p.info.SharedNamespace {
		return p.open(t, p.start(t))
	}
	return p.open(t, p.clientOf(t, s))
}

func (p *pluginHarness) crash(t T, s *stream.Store) *stream.Store {
	t.Helper()
	c := p.clientOf(t, s)
	if !p.info.Durable {
		return p.open(t, c)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("kill driver process %d: %v", c.Pid(), err)
	}
	t.Logf("killed driver process %d", c.Pid())
	return p.open(t, p.start(t))
}
