package soak

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratastream/strata/stream"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestSoakLeakCheck: with LeakWait set, a clean run reports the goroutine
// counts and passes; a store that leaves goroutines running, or a child
// process behind, fails the run naming the goroutine's function and the
// process.
func TestSoakLeakCheck(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		cfg := shortConfig(engineStores(t))
		cfg.LeakWait = 5 * time.Second
		rep, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || rep.Leaks.GoroutinesBefore == 0 || rep.Leaks.GoroutinesAfter > rep.Leaks.GoroutinesBefore {
			t.Fatalf("clean run: %+v, problems %q", rep.Leaks, rep.Problems)
		}
	})
	t.Run("goroutine", func(t *testing.T) {
		stop := make(chan struct{})
		defer close(stop)
		ns := engineStores(t)
		cfg := shortConfig(func(ctx context.Context, i int) (*stream.Store, error) {
			if i == 0 {
				// Several, so goroutines of earlier tests that end meanwhile
				// cannot hide them from the count.
				for range 5 {
					go leakyWorker(stop)
				}
			}
			return ns(ctx, i)
		})
		cfg.LeakWait = 200 * time.Millisecond
		rep, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || rep.Leaks.GoroutinesAfter <= rep.Leaks.GoroutinesBefore {
			t.Fatalf("leaked goroutine not caught: %+v", rep.Leaks)
		}
		if all := strings.Join(rep.Problems, "\n"); !strings.Contains(all, "goroutine leak") || !strings.Contains(all, "leakyWorker") {
			t.Fatalf("problems do not name the leaked goroutine: %q", rep.Problems)
		}
	})
	t.Run("process", func(t *testing.T) {
		cmd := exec.Command("sleep", "60")
		ns := engineStores(t)
		cfg := shortConfig(func(ctx context.Context, i int) (*stream.Store, error) {
			if i == 0 {
				if err := cmd.Start(); err != nil {
					return nil, err
				}
			}
			return ns(ctx, i)
		})
		cfg.LeakWait = 200 * time.Millisecond
		rep, err := Run(context.Background(), cfg)
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || len(rep.Leaks.Processes) != 1 || !strings.Contains(rep.Leaks.Processes[0], "sleep") {
			t.Fatalf("leaked process not caught: %+v", rep.Leaks)
		}
	})
}

// leakyWorker stands for a driver goroutine nobody stops.
func leakyWorker(stop <-chan struct{}) { <-stop }
