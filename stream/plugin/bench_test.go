//go:build unix

package plugin

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// The transport benchmark: append throughput and latency for three batch
// sizes and two pipeline depths, over
//
//   - bare:          a bare gRPC bidi stream of raw bytes (no protobuf) to a
//     helper process over a Unix socket, plaintext: the transport's limit;
//   - bare-tls:      the same with TLS, as go-plugin's AutoMTLS uses;
//   - memory-inproc: the memory driver linked in;
//   - memory-plugin: the memory driver out of process through this package.
//
// Run: go test -run '^$' -bench Append -benchtime 2s ./stream/plugin

var benchSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

var benchDepths = []int{1, 64}

// benchTarget is one way to append: submit starts an append of p and
// returns a function that waits for its ack and returns the next offset.
type benchTarget struct {
	submit func(p []byte) func() (int64, error)
	trim   func(next int64) // optional: lets the target drop acked data
	close  func()
	peer   int // pid of the other process (bare server, driver), or 0
}

func BenchmarkAppend(b *testing.B) {
	targets := []struct {
		name string
		open func(b *testing.B) benchTarget
	}{
		{"bare", func(b *testing.B) benchTarget { return openBare(b, false) }},
		{"bare-tls", func(b *testing.B) benchTarget { return openBare(b, true) }},
		{"memory-inproc", func(b *testing.B) benchTarget {
			st, err := memory.Open(context.Background(), nil)
			if err != nil {
				b.Fatal(err)
			}
			return streamTarget(b, st)
		}},
		{"memory-plugin", func(b *testing.B) benchTarget {
			bin := memoryBinary(b)
			// STRATA_BENCH_DRIVER_CPUPROFILE=file profiles the driver
			// process too (the last sub-benchmark run writes the file).
			if out := os.Getenv("STRATA_BENCH_DRIVER_CPUPROFILE"); out != "" {
				bin = binary(b, "profdriver", "stream/plugin/testdata/profdriver")
				b.Setenv("STRATA_PROFDRIVER_OUT", out)
			}
			st, err := Open(context.Background(), bin, nil)
			if err != nil {
				b.Fatal(err)
			}
			t := streamTarget(b, st)
			t.peer = st.Driver().(*hostStore).c.Pid()
			return t
		}},
	}
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			for _, size := range benchSizes {
				for _, depth := range benchDepths {
					b.Run(fmt.Sprintf("%s/inflight=%d", size.name, depth), func(b *testing.B) {
						t := tg.open(b)
						defer t.close()
						runAppends(b, t, size.n, depth)
					})
				}
			}
		})
	}
}

// streamTarget appends to a fresh stream of st.
func streamTarget(b *testing.B, st *stream.Store) benchTarget {
	ctx := context.Background()
	s, err := st.Open(ctx, "bench", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		b.Fatal(err)
	}
	return benchTarget{
		submit: func(p []byte) func() (int64, error) {
			f := s.Append(ctx, stream.Batch{Count: 1, Payload: p})
			return func() (int64, error) {
				r, err := f.Result()
				return r.NextOffset, err
			}
		},
		trim: func(next int64) {
			if err := s.Trim(ctx, next); err != nil {
				b.Errorf("trim: %v", err)
			}
		},
		close: func() {
			_ = s.Close()
			_ = st.Close()
		},
	}
}

// trimEvery is how many bytes a benchmark appends between trims, so the
// memory driver does not hold gigabytes.
const trimEvery = 64 << 20

// runAppends appends b.N batches of size bytes with at most depth in
// flight and reports MB/s and the p50/p99 latency of an append (from submit
// to ack).
func runAppends(b *testing.B, t benchTarget, size, depth int) {
	p := make([]byte, size)
	_, _ = rand.Read(p)
	type rec struct {
		wait func() (int64, error)
		t0   time.Time
	}
	lat := make([]time.Duration, 0, b.N)
	sem := make(chan struct{}, depth)
	q := make(chan rec, depth)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sinceTrim := 0
		for r := range q {
			next, err := r.wait()
			lat = append(lat, time.Since(r.t0))
			<-sem
			if err != nil {
				b.Errorf("append: %v", err)
				continue
			}
			if sinceTrim += size; sinceTrim >= trimEvery && t.trim != nil {
				t.trim(next)
				sinceTrim = 0
			}
		}
	}()
	b.SetBytes(int64(size))
	hostCPU0, peerCPU0 := selfCPU(), procCPU(t.peer)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sem <- struct{}{}
		t0 := time.Now()
		q <- rec{t.submit(p), t0}
	}
	close(q)
	<-done
	b.StopTimer()
	// CPU per append, host and peer process: unlike MB/s, it does not
	// depend on how busy the machine is.
	b.ReportMetric(float64((selfCPU()-hostCPU0).Microseconds())/float64(b.N), "host-cpu-µs/op")
	if t.peer != 0 {
		b.ReportMetric(float64((procCPU(t.peer)-peerCPU0).Microseconds())/float64(b.N), "peer-cpu-µs/op")
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user+system CPU time of process pid (Linux /proc), or 0.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ
	return time.Duration(ut+st) * time.Second / ticks
}

// The bare transport: a bidi stream whose messages are raw bytes, acked
// with 8 bytes each, between this process and a helper process.

const bareMethod = "/strata.bench.v1.Bare/Echo"

// rawBytesCodec moves *[]byte messages without protobuf. Its name is
// "proto" only so that it rides the default content type.
type rawBytesCodec struct{}

func (rawBytesCodec) Name() string { return "proto" }
func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawBytesCodec) Unmarshal(d mem.BufferSlice, v any) error {
	*v.(*[]byte) = d.Materialize()
	return nil
}

var bareDesc = grpc.ServiceDesc{
	ServiceName: "strata.bench.v1.Bare",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Echo",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, s grpc.ServerStream) error {
			ack := make([]byte, 8)
			for {
				var m []byte
				if err := s.RecvMsg(&m); err != nil {
					return nil
				}
				if err := s.SendMsg(&ack); err != nil {
					return err
				}
			}
		},
	}},
}

// runBareServer is the "bare-server" role: serve bareDesc on the Unix
// socket STRATA_BENCH_SOCKET (with TLS when STRATA_BENCH_CERT and
// STRATA_BENCH_KEY hold PEM), print "ready", serve until killed.
func runBareServer() {
	l, err := net.Listen("unix", os.Getenv("STRATA_BENCH_SOCKET"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	opts := append(serverOptions(), grpc.ForceServerCodecV2(rawBytesCodec{}))
	if certPEM := os.Getenv("STRATA_BENCH_CERT"); certPEM != "" {
		cert, err := tls.X509KeyPair([]byte(certPEM), []byte(os.Getenv("STRATA_BENCH_KEY")))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	}
	s := grpc.NewServer(opts...)
	s.RegisterService(&bareDesc, nil)
	fmt.Println("ready")
	_ = s.Serve(l)
}

// selfSigned returns a certificate for "localhost" as PEM, in the style of
// go-plugin's AutoMTLS certificates.
func selfSigned(b testing.TB) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		b.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		b.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), pool
}

// openBare starts the bare server process and opens one bidi stream to it.
func openBare(b *testing.B, withTLS bool) benchTarget {
	dir, err := os.MkdirTemp("", "strata-bare-")
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), roleEnv+"=bare-server", "STRATA_BENCH_SOCKET="+sock)
	creds := insecure.NewCredentials()
	if withTLS {
		certPEM, keyPEM, pool := selfSigned(b)
		cmd.Env = append(cmd.Env, "STRATA_BENCH_CERT="+string(certPEM), "STRATA_BENCH_KEY="+string(keyPEM))
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		b.Fatalf("bare server: %q", line)
	}
	conn, err := grpc.NewClient("unix://"+sock,
		grpc.WithTransportCredentials(creds),
		grpc.WithInitialWindowSize(windowBytes),
		grpc.WithInitialConnWindowSize(windowBytes),
		grpc.WithReadBufferSize(socketBufferBytes),
		grpc.WithWriteBufferSize(socketBufferBytes),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawBytesCodec{})))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := conn.NewStream(ctx, &bareDesc.Streams[0], bareMethod)
	if err != nil {
		b.Fatal(err)
	}
	// Acks arrive in order; each completes the oldest pending append.
	var mu sync.Mutex
	var pending []chan error
	var sent int64
	go func() {
		for {
			var ack []byte
			err := s.RecvMsg(&ack)
			mu.Lock()
			if len(pending) == 0 {
				mu.Unlock()
				return
			}
			ch := pending[0]
			pending = pending[1:]
			mu.Unlock()
			ch <- err
			if err != nil {
				return
			}
		}
	}()
	return benchTarget{
		peer: cmd.Process.Pid,
		submit: func(p []byte) func() (int64, error) {
			ch := make(chan error, 1)
			mu.Lock()
			pending = append(pending, ch)
			sent++
			n := sent
			mu.Unlock()
			if err := s.SendMsg(&p); err != nil {
				return func() (int64, error) { return 0, err }
			}
			return func() (int64, error) { return n, <-ch }
		},
		close: func() {
			_ = s.CloseSend()
			cancel()
			_ = conn.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = os.RemoveAll(dir)
		},
	}
}
