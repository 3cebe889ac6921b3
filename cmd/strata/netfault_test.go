package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/drivers/azure"
	"github.com/stratastream/strata/drivers/s3"
	"github.com/stratastream/strata/internal/soak"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream"
)

// faultProxy is a TCP proxy between a driver and its backend that can
// delay traffic, reset every connection, or cut the network (reset and
// refuse) until restored.
type faultProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	delay time.Duration
	down  bool
}

func startProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.resetAll() })
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			rst(c)
			continue
		}
		u, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
		if err != nil {
			rst(c)
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

// pipe copies src to dst, delaying each read by the current delay.
func (p *faultProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.delay
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if err == io.EOF {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				return
			}
			p.forget(src)
			p.forget(dst)
			rst(src)
			rst(dst)
			return
		}
	}
}

func (p *faultProxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// rst closes c with a TCP reset.
func rst(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *faultProxy) resetAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		rst(c)
	}
}

func (p *faultProxy) set(delay time.Duration, down bool) {
	p.mu.Lock()
	p.delay, p.down = delay, down
	p.mu.Unlock()
	if down {
		p.resetAll()
	}
}

// netFault starts one of: nothing, a delay of 20-120 ms per read, a reset
// of every connection some time into the round, or a cut of 0.1-1 s.
func (p *faultProxy) netFault(round int, rng *rand.Rand) (string, func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	after := func(d time.Duration, f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-stop:
			case <-time.After(d):
				f()
			}
		}()
	}
	end := func() {
		close(stop)
		wg.Wait()
		p.set(0, false)
	}
	switch rng.IntN(4) {
	case 1:
		d := time.Duration(20+rng.IntN(100)) * time.Millisecond
		p.set(d, false)
		return fmt.Sprintf("delay %v", d), end
	case 2:
		after(time.Duration(rng.IntN(300))*time.Millisecond, p.resetAll)
		return "reset", end
	case 3:
		at := time.Duration(rng.IntN(300)) * time.Millisecond
		length := time.Duration(100+rng.IntN(900)) * time.Millisecond
		after(at, func() { p.set(0, true) })
		after(at+length, func() { p.set(0, false) })
		return fmt.Sprintf("cut %v", length), end
	}
	return "", end
}

// privateTestbed starts a backend instance of this test's own (so that no
// other test's testbed/ctl stop lands in the soak), stops it at the end,
// and returns the driver config file named by the env variable want.
func privateTestbed(t *testing.T, name, want string) string {
	t.Helper()
	dir := t.TempDir()
	script := func(verb string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(testbed.RepoRoot(), "testbed", verb), name)
		cmd.Env = append(os.Environ(), "STRATA_TESTBED_DIR="+dir)
		return cmd
	}
	up := script("up")
	var stderr bytes.Buffer
	up.Stderr = &stderr
	out, err := up.Output()
	t.Cleanup(func() {
		if b, err := script("down").CombinedOutput(); err != nil {
			t.Errorf("testbed/down %s: %v\n%s", name, err, b)
		}
	})
	if err != nil {
		t.Fatalf("testbed/up %s: %v\n%s", name, err, stderr.String())
	}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if ok && k == want {
			return strings.Trim(v, `'"`)
		}
	}
	t.Fatalf("testbed/up %s printed no %s", name, want)
	return ""
}

// TestSoakNetworkFaults runs the fencing soak on the s3 driver (MinIO) and
// the azure driver (Azurite), each a private instance, with every owner's traffic through a proxy
// that delays, resets and cuts the connections to the backend; the
// verifier reads directly. Nothing acked may be lost, duplicated or
// changed, and every error the faults cause must be ErrUnavailable or
// ErrFenced.
func TestSoakNetworkFaults(t *testing.T) {
	cases := []struct {
		driver, testbed, env, field string
		open                        stream.Opener
	}{
		{"s3", "minio", "STRATA_S3_CONFIG", "endpoint", s3.Open},
		{"azure", "azurite", "STRATA_AZURE_CONFIG", "account_url", azure.Open},
	}
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(privateTestbed(t, tc.testbed, tc.env))
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			if err := yaml.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(fmt.Sprint(cfg[tc.field]))
			if err != nil {
				t.Fatal(err)
			}
			proxy := startProxy(t, u.Host)
			cfg["timeouts"] = map[string]string{"connect": "1s", "request": "2s", "operation": "6s"}
			cfg["retry"] = map[string]any{"max_attempts": 3}
			direct, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			u.Host = proxy.addr()
			cfg[tc.field] = u.String()
			viaProxy, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			const hosts = 2
			rep, err := soak.Run(context.Background(), soak.Config{
				NewStore: func(ctx context.Context, i int) (stream.Store, error) {
					if i < hosts {
						return tc.open(ctx, viaProxy)
					}
					return tc.open(ctx, direct) // the verifier
				},
				NetFault:  proxy.netFault,
				Hosts:     hosts,
				Streams:   2,
				Owners:    3,
				Rounds:    4,
				Appends:   6,
				Seed:      5,
				OpTimeout: 2 * time.Minute,
				Prefix:    fmt.Sprintf("netfault-%d", time.Now().UnixNano()),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d operations, %d network faults (%d errors surfaced), %d fenced, %d acked, %d verified, lost %d, duplicated %d, diverged %d",
				tc.driver, rep.Operations, rep.Faults, rep.FaultErrs, rep.Fenced, rep.Acked, rep.Verified, rep.Lost, rep.Duplicated, rep.Diverged)
			if !rep.OK() {
				t.Fatalf("soak under network faults: %+v", *rep)
			}
			if rep.Faults == 0 || rep.Acked == 0 || rep.Verified != rep.Acked {
				t.Fatalf("no faults or nothing verified: %+v", *rep)
			}
		})
	}
}
