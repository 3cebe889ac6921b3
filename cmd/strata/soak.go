package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/stratastream/strata/internal/soak"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
)

const soakUsage = `Usage: strata soak --driver NAME|PATH [flags]

Races owners opening the same streams with increasing (and equal and stale)
epochs while each pipelines appends, for --rounds rounds, then reads every
stream back through two stores that took no part and checks every ack:
nothing acked is lost, duplicated or changed, and no fenced session acks past
a newer owner's open. Prints operations, faults injected, acked records,
verified, lost, duplicated, diverged. Then checks for leaks: goroutines back
to their count before the run and no driver process left, within
--leak-wait. Exit 0 when all hold, 1 when not (with the --seed that replays
the workload), 2 on bad input. --duration bounds a long run by time.

The driver runs in-process (built-ins only) unless --out-of-process, where
every store is its own driver process; --kill-driver SIGKILLs one of them in
about half the rounds, mid-write, and reopens it (durable drivers only).

Flags:
`

// soakJSON is the --json report.
type soakJSON struct {
	Driver       string   `json:"driver"`
	OutOfProcess bool     `json:"out_of_process"`
	Seed         uint64   `json:"seed"`
	Rounds       int      `json:"rounds"`
	RoundsRun    int      `json:"rounds_run"`
	Seconds      float64  `json:"seconds"`
	Operations   int64    `json:"operations"`
	Faults       int64    `json:"faults_injected"`
	FaultErrors  int64    `json:"fault_errors"`
	Fenced       int64    `json:"fenced"`
	Acked        int64    `json:"acked_records"`
	AckedOffsets int64    `json:"acked_offsets"`
	Verified     int64    `json:"verified"`
	Lost         int64    `json:"lost"`
	Duplicated   int64    `json:"duplicated"`
	Diverged     int64    `json:"diverged"`
	Violations   int64    `json:"violations"`
	Unexpected   int64    `json:"unexpected_errors"`
	Goroutines   [2]int   `json:"goroutines_before_after"`
	Leaked       []string `json:"leaked_goroutines"`
	ProcsLeft    []string `json:"driver_processes_left"`
	Problems     []string `json:"problems"`
	OK           bool     `json:"ok"`
}

// runSoak is `strata soak`.
func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata soak", soakUsage, stderr)
	var (
		driver     = fs.String("driver", "", "built-in driver name or plugin binary path (required)")
		configPath = fs.String("config", "", "driver config file (YAML or JSON); default: a temporary directory for nfs, $STRATA_<NAME>_CONFIG for the others")
		outOfProc  = fs.Bool("out-of-process", false, "run the driver as plugin processes (one per store)")
		kill       = fs.Bool("kill-driver", false, "SIGKILL a driver process mid-write in about half the rounds (implies --out-of-process)")
		rounds     = fs.Int("rounds", 100, "rounds of racing opens")
		streams    = fs.Int("streams", 4, "streams raced on")
		owners     = fs.Int("owners", 4, "owners racing for each stream per round")
		appends    = fs.Int("appends", 8, "most pipelined appends of one owner per round")
		payload    = fs.Int("payload-bytes", 200, "each append carries 0 to this many random bytes after its 24-byte header (large values exercise a driver's large-put path)")
		hosts      = fs.Int("hosts", 2, "stores (driver processes out of process) the owners share")
		seed       = fs.Uint64("seed", 0, "workload seed (default: random, printed)")
		asJSON     = fs.Bool("json", false, "print one JSON object instead of the table")
		keep       = fs.Bool("keep", false, "keep the soak's streams (default: delete them after a clean run)")
		opTimeout  = fs.Duration("op-timeout", time.Minute, "longest an owner's session or a verifier read may take before it counts as an unexpected error")
		duration   = fs.Duration("duration", 0, "start no round after this long (0: no limit) and verify the rounds that ran; each round is unchanged")
		leakWait   = fs.Duration("leak-wait", 10*time.Second, "longest to wait after the run for goroutines to settle and driver processes to exit before they count as leaked")
	)
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "strata soak: "+format+"\n", a...)
		return 2
	}
	if *driver == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if *rounds <= 0 || *streams <= 0 || *owners <= 0 || *appends <= 0 || *payload <= 0 || *hosts <= 0 || *leakWait <= 0 {
		return bad("--rounds, --streams, --owners, --appends, --payload-bytes, --hosts and --leak-wait must be positive")
	}
	if *kill {
		*outOfProc = true
	}
	if !*outOfProc && inProcessOpeners[*driver] == nil {
		return bad("driver %q is not a built-in (%s); run a plugin binary with --out-of-process", *driver, strings.Join(builtinDrivers, ", "))
	}
	if !isFlagSet(fs, "seed") {
		*seed = rand.Uint64() >> 11 // short enough to type back
	}
	config, cleanup, err := soakConfig(*driver, *configPath, stderr)
	defer cleanup()
	if err != nil {
		return bad("%v", err)
	}
	opener := inProcessOpeners[*driver]
	var bin *driverCommand
	if *outOfProc {
		drv, err := resolveDriver(*driver)
		if err != nil {
			return bad("%v", err)
		}
		bin = &drv
	}
	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	hs := &soakHosts{config: config, opener: opener, bin: bin, logger: quiet, clients: map[int]*plugin.Client{}}
	defer hs.closeAll()
	began := time.Now()
	prefix := fmt.Sprintf("soak-%d-%d", *seed, time.Now().UnixNano()%1e9)
	cfg := soak.Config{
		NewStore:     hs.newStore,
		Hosts:        *hosts,
		Streams:      *streams,
		Owners:       *owners,
		Rounds:       *rounds,
		Appends:      *appends,
		PayloadBytes: *payload,
		Seed:         *seed,
		OpTimeout:    *opTimeout,
		LeakWait:     *leakWait,
		Duration:     *duration,
		Release: func(ctx context.Context, rep *soak.Report) {
			if rep.OK() && !*keep {
				hs.deleteStreams(ctx, prefix)
			}
			hs.closeAll()
		},
		Prefix: prefix,
		Logf: func(format string, a ...any) {
			fmt.Fprintf(stderr, "strata soak: %6.1fs "+format+"\n", append([]any{time.Since(began).Seconds()}, a...)...)
		},
	}
	if *kill {
		cfg.Kill = hs.kill
	}
	mode := "in-process"
	if *outOfProc {
		mode = "out-of-process"
	}
	fmt.Fprintf(stderr, "strata soak: driver %s (%s), seed %d: %d rounds x %d streams x %d owners, up to %d pipelined appends each, %d stores%s\n",
		*driver, mode, *seed, *rounds, *streams, *owners, *appends, *hosts, map[bool]string{true: ", driver kills", false: ""}[*kill])
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "strata soak: %v\n", err)
		if errors.Is(err, stream.ErrInvalidArgument) {
			return 2
		}
		return 1
	}
	replay := fmt.Sprintf("strata %s", strings.Join(replayArgs(fs, *seed), " "))
	if *asJSON {
		out := soakJSON{Driver: *driver, OutOfProcess: *outOfProc, Seed: rep.Seed, Rounds: *rounds, RoundsRun: rep.Rounds, Seconds: time.Since(began).Seconds(),
			Operations: rep.Operations, Faults: rep.Faults, FaultErrors: rep.FaultErrs, Fenced: rep.Fenced,
			Acked: rep.Acked, AckedOffsets: rep.AckedOffs, Verified: rep.Verified, Lost: rep.Lost,
			Duplicated: rep.Duplicated, Diverged: rep.Diverged, Violations: rep.Violations,
			Unexpected: rep.Unexpected, Goroutines: [2]int{rep.Leaks.GoroutinesBefore, rep.Leaks.GoroutinesAfter},
			Leaked: append([]string{}, rep.Leaks.Goroutines...), ProcsLeft: append([]string{}, rep.Leaks.Processes...),
			Problems: append([]string{}, rep.Problems...), OK: rep.OK()}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	} else {
		fmt.Fprintf(stdout, "driver            %s (%s)\n", *driver, mode)
		fmt.Fprintf(stdout, "seed              %d\n", rep.Seed)
		fmt.Fprintf(stdout, "rounds            %d of %d\n", rep.Rounds, *rounds)
		fmt.Fprintf(stdout, "operations        %d\n", rep.Operations)
		fmt.Fprintf(stdout, "faults injected   %d (driver kills; %d errors surfaced)\n", rep.Faults, rep.FaultErrs)
		fmt.Fprintf(stdout, "fenced            %d (opens and appends refused ErrFenced)\n", rep.Fenced)
		fmt.Fprintf(stdout, "acked records     %d (%d offsets)\n", rep.Acked, rep.AckedOffs)
		fmt.Fprintf(stdout, "verified          %d\n", rep.Verified)
		fmt.Fprintf(stdout, "lost              %d\n", rep.Lost)
		fmt.Fprintf(stdout, "duplicated        %d\n", rep.Duplicated)
		fmt.Fprintf(stdout, "diverged          %d\n", rep.Diverged)
		fmt.Fprintf(stdout, "fence violations  %d\n", rep.Violations)
		fmt.Fprintf(stdout, "unexpected errors %d\n", rep.Unexpected)
		fmt.Fprintf(stdout, "goroutines        %d before, %d after\n", rep.Leaks.GoroutinesBefore, rep.Leaks.GoroutinesAfter)
		fmt.Fprintf(stdout, "driver processes  %d left\n", len(rep.Leaks.Processes))
		fmt.Fprintf(stdout, "time              %.1fs\n", time.Since(began).Seconds())
	}
	if !rep.OK() {
		for _, p := range rep.Problems {
			fmt.Fprintf(stderr, "strata soak: FAIL: %s\n", p)
		}
		fmt.Fprintf(stderr, "strata soak: FAIL with seed %d; replay the workload: %s\n", rep.Seed, replay)
		return 1
	}
	return 0
}

// isFlagSet reports whether the flag was given on the command line.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// replayArgs is the command line that replays the run's workload.
func replayArgs(fs *flag.FlagSet, seed uint64) []string {
	args := []string{"soak"}
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "seed" {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return append(args, fmt.Sprintf("--seed=%d", seed))
}

// soakConfig returns the driver config for the soak: the --config file,
// else a temporary directory for nfs, a private namespace for memory, or
// $STRATA_<NAME>_CONFIG.
func soakConfig(driver, path string, stderr io.Writer) ([]byte, func(), error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, func() {}, fmt.Errorf("cannot read driver config: %v", err)
		}
		return b, func() {}, nil
	}
	if driver == "memory" {
		return []byte("namespace: strata-soak\n"), func() {}, nil
	}
	config, note, cleanup, err := driverConfig(driver)
	if err != nil {
		return nil, cleanup, err
	}
	if config == nil {
		return nil, cleanup, fmt.Errorf("driver %s needs --config (or STRATA_%s_CONFIG)", driver, strings.ToUpper(driver))
	}
	fmt.Fprintf(stderr, "strata soak: %s config: %s\n", driver, note)
	return config, cleanup, nil
}

// soakHosts opens the soak's stores: in-process with the driver's Opener,
// or out-of-process with one driver process per store (kept to kill it).
// A driver without a shared namespace (memory) gets one store for all.
type soakHosts struct {
	config []byte
	opener stream.Opener
	bin    *driverCommand // nil: in process
	logger *slog.Logger

	mu      sync.Mutex
	clients map[int]*plugin.Client
	shared  *stream.Store // the one store of a driver without a shared namespace
}

func (h *soakHosts) newStore(ctx context.Context, i int) (*stream.Store, error) {
	h.mu.Lock()
	shared := h.shared
	h.mu.Unlock()
	if shared != nil {
		return stream.NewStore(unclosedStore{shared.Driver()}), nil
	}
	var st *stream.Store
	if h.bin == nil {
		s, err := h.opener(ctx, h.config)
		if err != nil {
			return nil, err
		}
		st = s
	} else {
		c, err := plugin.Start(ctx, h.bin.Path, append(h.bin.options(), plugin.WithLogger(h.logger))...)
		if err != nil {
			return nil, err
		}
		s, err := c.OpenStore(ctx, h.config)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		h.mu.Lock()
		if old := h.clients[i]; old != nil {
			_ = old.Close()
		}
		h.clients[i] = c
		h.mu.Unlock()
		st = s
	}
	if !st.Info().SharedNamespace {
		h.mu.Lock()
		h.shared = st
		h.mu.Unlock()
		return stream.NewStore(unclosedStore{st.Driver()}), nil
	}
	return st, nil
}

func (h *soakHosts) kill(i int) error {
	h.mu.Lock()
	c := h.clients[i]
	h.mu.Unlock()
	if c == nil {
		return fmt.Errorf("store %d has no driver process", i)
	}
	return c.Kill()
}

// deleteStreams removes the soak's streams through a fresh store.
func (h *soakHosts) deleteStreams(ctx context.Context, prefix string) {
	st, err := h.newStore(ctx, -1)
	if err != nil {
		return
	}
	defer st.Close()
	names, err := st.List(ctx, prefix+"/")
	if err != nil {
		return
	}
	for _, n := range names {
		_ = st.Delete(ctx, n)
	}
}

// closeAll closes the shared store and every driver process; it may be
// called more than once.
func (h *soakHosts) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shared != nil {
		_ = h.shared.Close()
		h.shared = nil
	}
	for i, c := range h.clients {
		_ = c.Close()
		delete(h.clients, i)
	}
}

// unclosedStore shares one store: Close is a no-op (closeAll closes it).
type unclosedStore struct{ stream.DriverStore }

func (unclosedStore) Close() error { return nil }
