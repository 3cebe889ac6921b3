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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/drivers/azure"
	"github.com/stratastream/strata/drivers/hdfs"
	"github.com/stratastream/strata/drivers/s3"
	"github.com/stratastream/strata/internal/soak"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream"
)

// faultProxy is a TCP proxy between a driver and its backend that can
// delay traffic, reset every connection, or cut the network (reset and
// refuse) until restored. It can listen on several addresses, each
// forwarding to its own upstream (the hdfs driver talks to a NameNode and
// to the DataNodes it names), and its faults hit all of them at once.
type faultProxy struct {
	mu       sync.Mutex
	lns      []net.Listener
	accepted map[string]int // connections accepted, by listening address
	conns    map[net.Conn]struct{}
	delay    time.Duration
	down     bool
}

// startProxy starts a proxy listening on a free loopback port and
// forwarding to upstream.
func startProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	p := &faultProxy{accepted: map[string]int{}, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		p.mu.Lock()
		lns := p.lns
		p.mu.Unlock()
		for _, ln := range lns {
			_ = ln.Close()
		}
		p.resetAll()
	})
	p.listen(t, "127.0.0.1:0", upstream)
	return p
}

// listen adds a route: connections to addr are forwarded to upstream.
func (p *faultProxy) listen(t *testing.T, addr, upstream string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("proxy for %s: %v", upstream, err)
	}
	p.mu.Lock()
	p.lns = append(p.lns, ln)
	p.mu.Unlock()
	go p.accept(ln, upstream)
}

// addr is the address of the first route (startProxy's).
func (p *faultProxy) addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lns[0].Addr().String()
}

// connections returns how many connections the route listening on addr
// accepted and forwarded.
func (p *faultProxy) connections(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted[addr]
}

func (p *faultProxy) accept(ln net.Listener, upstream string) {
	for {
		c, err := ln.Accept()
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
		u, err := net.DialTimeout("tcp", upstream, 5*time.Second)
		if err != nil {
			rst(c)
			continue
		}
		p.mu.Lock()
		p.accepted[ln.Addr().String()]++
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

// privateTestbedEnv starts a backend instance of this test's own (so that
// no other test's testbed/ctl stop lands in the soak), stops it at the end,
// and returns every variable testbed/up printed (want, the driver config
// file's variable, among them); extraEnv (KEY=VALUE) is added to the
// environment of testbed/up.
func privateTestbedEnv(t *testing.T, name, want string, extraEnv ...string) map[string]string {
	t.Helper()
	testbed.SkipShort(t, "a private "+name+" testbed (testbed/up "+name+")")
	dir := t.TempDir()
	script := func(verb string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(testbed.RepoRoot(), "testbed", verb), name)
		cmd.Env = append(append(os.Environ(), "STRATA_TESTBED_DIR="+dir), extraEnv...)
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
	env := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if ok {
			env[k] = strings.Trim(v, `'"`)
		}
	}
	if env[want] == "" {
		t.Fatalf("testbed/up %s printed no %s", name, want)
	}
	return env
}

// netfaultCase is one driver of TestSoakNetworkFaults.
type netfaultCase struct {
	driver, testbed, env string
	// testbedEnv is added to testbed/up's environment.
	testbedEnv []string
	open       stream.Opener
	// rounds and seed of the soak (4 and 5 when zero).
	rounds int
	seed   uint64
	// route starts the proxy for the backend of config cfg (testbed/up
	// printed env) and rewrites cfg in place: first as the verifier's
	// direct config (timeouts), then, after direct returns, as the owners'
	// config through the proxy.
	route func(t *testing.T, env map[string]string, cfg map[string]any) (p *faultProxy, viaProxy func(t *testing.T))
}

// urlRoute is the route of a driver whose config names its backend by URL
// in field: the proxy stands in for the URL's host.
func urlRoute(field string) func(t *testing.T, env map[string]string, cfg map[string]any) (*faultProxy, func(t *testing.T)) {
	return func(t *testing.T, _ map[string]string, cfg map[string]any) (*faultProxy, func(t *testing.T)) {
		u, err := url.Parse(fmt.Sprint(cfg[field]))
		if err != nil {
			t.Fatal(err)
		}
		proxy := startProxy(t, u.Host)
		cfg["timeouts"] = map[string]string{"connect": "1s", "request": "2s", "operation": "6s"}
		cfg["retry"] = map[string]any{"max_attempts": 3}
		return proxy, func(t *testing.T) {
			u.Host = proxy.addr()
			cfg[field] = u.String()
		}
	}
}

// hdfsRoute puts the proxy between the hdfs driver and both the NameNode
// and the DataNode. The client dials the NameNode at the configured address
// and DataNodes at the address the NameNode hands out; the private testbed
// registers its DataNode as 127.0.0.2 (STRATA_HDFS_DATANODE_HOSTNAME) while
// it listens on 127.0.0.1:PORT, so the owners' config (use_datanode_hostname)
// dials 127.0.0.2:PORT, where the proxy listens, and the verifier's
// (by IP) reaches the DataNode directly.
func hdfsRoute(t *testing.T, env map[string]string, cfg map[string]any) (*faultProxy, func(t *testing.T)) {
	nns, _ := cfg["namenodes"].([]any)
	if len(nns) != 1 {
		t.Fatalf("hdfs testbed config: namenodes %v, want one", cfg["namenodes"])
	}
	dn, host := env["STRATA_HDFS_DATANODE"], env["STRATA_HDFS_DATANODE_HOSTNAME"]
	_, port, err := net.SplitHostPort(dn)
	if err != nil || host == "" {
		t.Fatalf("testbed/up hdfs printed STRATA_HDFS_DATANODE=%q STRATA_HDFS_DATANODE_HOSTNAME=%q", dn, host)
	}
	proxy := startProxy(t, fmt.Sprint(nns[0]))
	dnProxy := net.JoinHostPort(host, port)
	proxy.listen(t, dnProxy, dn)
	cfg["timeouts"] = map[string]string{"connect": "1s", "operation": "6s"}
	return proxy, func(t *testing.T) {
		t.Cleanup(func() {
			nn, dn := proxy.connections(proxy.addr()), proxy.connections(dnProxy)
			t.Logf("hdfs: through the proxy: %d NameNode connections, %d DataNode connections", nn, dn)
			if nn == 0 || dn == 0 {
				t.Errorf("hdfs traffic bypassed the proxy: %d NameNode and %d DataNode connections through it", nn, dn)
			}
		})
		cfg["namenodes"] = []string{proxy.addr()}
		cfg["use_datanode_hostname"] = true
	}
}

// netfaultWorkload returns rounds and seed, or the values of
// STRATA_NETFAULT_ROUNDS and STRATA_NETFAULT_SEED when set (for longer
// runs by hand: see docs/reliability.md).
func netfaultWorkload(t *testing.T, rounds int, seed uint64) (int, uint64) {
	t.Helper()
	if v := os.Getenv("STRATA_NETFAULT_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("STRATA_NETFAULT_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	if v := os.Getenv("STRATA_NETFAULT_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("STRATA_NETFAULT_SEED=%q: want a number", v)
		}
		seed = n
	}
	return rounds, seed
}

// TestSoakNetworkFaults runs the fencing soak on the s3 driver (MinIO),
// the azure driver (Azurite) and the hdfs driver (MiniDFSCluster: NameNode
// and DataNode), each a private instance, with every owner's traffic
// through a proxy that delays, resets and cuts the connections to the
// backend; the verifier reads directly. Nothing acked may be lost,
// duplicated or changed, and every error the faults cause must be
// ErrUnavailable or ErrFenced.
func TestSoakNetworkFaults(t *testing.T) {
	cases := []netfaultCase{
		{driver: "s3", testbed: "minio", env: "STRATA_S3_CONFIG", open: s3.Open, route: urlRoute("endpoint")},
		{driver: "azure", testbed: "azurite", env: "STRATA_AZURE_CONFIG", open: azure.Open, route: urlRoute("account_url")},
		// Seed 22: reset, cut, nothing, delay, nothing: every kind, and
		// rounds without a fault right after one, where an error is
		// unexpected (the driver must be back with the network).
		{driver: "hdfs", testbed: "hdfs", env: "STRATA_HDFS_CONFIG", open: hdfs.Open, route: hdfsRoute,
			testbedEnv: []string{"STRATA_HDFS_DATANODE_HOSTNAME=127.0.0.2"}, rounds: 5, seed: 22},
	}
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			t.Parallel()
			env := privateTestbedEnv(t, tc.testbed, tc.env, tc.testbedEnv...)
			raw, err := os.ReadFile(env[tc.env])
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			if err := yaml.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			proxy, viaProxyCfg := tc.route(t, env, cfg)
			direct, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			viaProxyCfg(t)
			viaProxy, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			const hosts = 2
			rounds, seed := 4, uint64(5)
			if tc.rounds != 0 {
				rounds, seed = tc.rounds, tc.seed
			}
			rounds, seed = netfaultWorkload(t, rounds, seed)
			rep, err := soak.Run(context.Background(), soak.Config{
				NewStore: func(ctx context.Context, i int) (*stream.Store, error) {
					if i < hosts {
						return tc.open(ctx, viaProxy)
					}
					return tc.open(ctx, direct) // the verifier
				},
				NetFault: func(round int, rng *rand.Rand) (string, func()) {
					what, end := proxy.netFault(round, rng)
					t.Logf("%s: round %d: fault %q", tc.driver, round, what)
					return what, end
				},
				Logf:      func(format string, args ...any) { t.Logf(tc.driver+": "+format, args...) },
				Hosts:     hosts,
				Streams:   2,
				Owners:    3,
				Rounds:    rounds,
				Appends:   6,
				Seed:      seed,
				OpTimeout: 2 * time.Minute,
				Prefix:    fmt.Sprintf("netfault-%d", time.Now().UnixNano()),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d rounds (seed %d), %d operations, %d network faults (%d errors surfaced), %d fenced, %d acked, %d verified, lost %d, duplicated %d, diverged %d, violations %d, unexpected %d",
				tc.driver, rounds, seed, rep.Operations, rep.Faults, rep.FaultErrs, rep.Fenced, rep.Acked, rep.Verified, rep.Lost, rep.Duplicated, rep.Diverged, rep.Violations, rep.Unexpected)
			if !rep.OK() {
				t.Fatalf("soak under network faults: %+v", *rep)
			}
			if rep.Faults == 0 || rep.Acked == 0 || rep.Verified != rep.Acked {
				t.Fatalf("no faults or nothing verified: %+v", *rep)
			}
		})
	}
}
