//go:build linux

package plugin

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// TestAutoMTLSRefusesStrangers: the driver's go-plugin socket (the one
// address another process could find) answers only a client holding the
// host's AutoMTLS certificate. A plaintext gRPC client and a TLS client
// without a certificate, or with a certificate of its own, are refused;
// the host's own connection, on the same address, works.
func TestAutoMTLSRefusesStrangers(t *testing.T) {
	c := startMemory(t)
	rc := c.pc.ReattachConfig()
	if rc == nil || rc.Addr == nil {
		t.Fatal("no go-plugin address")
	}
	addr := rc.Addr
	if addr.Network() != "unix" {
		t.Fatalf("go-plugin listens on %s %s, want a unix socket", addr.Network(), addr)
	}
	ctx := testCtx(t)
	if _, err := c.rpc.Hello(ctx, &streamv1.HelloRequest{}); err != nil {
		t.Fatalf("the host's own mTLS connection: %v", err)
	}
	certPEM, keyPEM, _ := selfSigned(t) // a certificate the driver never saw
	own, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	strangers := []struct {
		name  string
		creds credentials.TransportCredentials
	}{
		{"plaintext", insecure.NewCredentials()},
		{"TLS without a client certificate", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})},
		{"TLS with a certificate of its own", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{own}})},
	}
	for _, s := range strangers {
		t.Run(s.name, func(t *testing.T) {
			conn, err := grpc.NewClient("passthrough:///driver",
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", addr.String())
				}),
				grpc.WithTransportCredentials(s.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			cl := streamv1.NewDriverClient(conn)
			if _, err := cl.Hello(cctx, &streamv1.HelloRequest{}); err == nil {
				t.Fatal("Hello succeeded without the host's certificate")
			}
			if _, err := cl.OpenStore(cctx, &streamv1.OpenStoreRequest{}); err == nil {
				t.Fatal("OpenStore succeeded without the host's certificate")
			}
		})
	}
}

// TestDataChannelIsUnnamed: the data channel (Append and Fetch without TLS)
// is an unnamed socket pair whose driver end is inherited as fd 3
// (STRATA_DRIVER_DATA_FD=3): it has no path in the file system and no
// network address, so no other process can connect to it. The driver's
// only named socket is go-plugin's mTLS one, and it listens on no TCP port.
// (The driver dups fd 3 into its gRPC server and closes it, so the number
// 3 is later reused by go-plugin's listener; the test therefore checks
// every socket the driver holds.)
func TestDataChannelIsUnnamed(t *testing.T) {
	c := startMemory(t)
	if c.dataConn == nil {
		t.Fatal("no data channel")
	}
	st, err := c.OpenStore(testCtx(t), nil) // traffic on both connections
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pid := c.Pid()
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains("\x00"+string(env)+"\x00", "\x00"+dataFDEnv+"=3\x00") {
		t.Fatalf("driver environment does not name fd 3 as the data channel: %q", env)
	}
	unix := procSockets(t, "unix", 6, 7)
	tcpListen := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		for ino, state := range procSockets(t, table, 9, 3) {
			if state == "0A" {
				tcpListen[ino] = true
			}
		}
	}
	goPlugin := c.pc.ReattachConfig().Addr.String()
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	unnamed := 0
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err != nil {
			continue
		}
		ino, ok := strings.CutPrefix(l, "socket:[")
		if !ok {
			continue
		}
		ino = strings.TrimSuffix(ino, "]")
		if tcpListen[ino] {
			t.Errorf("driver fd %s listens on TCP", fd.Name())
		}
		path, isUnix := unix[ino]
		switch {
		case !isUnix:
		case path == "":
			unnamed++
		case path != goPlugin:
			t.Errorf("driver fd %s is a unix socket at %q besides go-plugin's %q", fd.Name(), path, goPlugin)
		}
	}
	if unnamed == 0 {
		t.Fatal("driver holds no unnamed unix socket: where is the data channel?")
	}
}

// procSockets reads /proc/net/TABLE and maps each socket's inode (field
// inodeField) to field valueField ("" when the line has none).
func procSockets(t *testing.T, table string, inodeField, valueField int) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc/net", table))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) <= inodeField {
			continue
		}
		v := ""
		if len(fields) > valueField {
			v = fields[valueField]
		}
		m[fields[inodeField]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestChecksumMismatchNeverRuns: a binary whose SHA-256 does not match
// WithSHA256 is refused before it is executed. The binary here is a script
// that leaves a marker file when it runs: with its right checksum it runs
// (and then fails the handshake), with a wrong one the marker never
// appears.
func TestChecksumMismatchNeverRuns(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	bin := filepath.Join(dir, "strata-driver-marker")
	script := "#!/bin/sh\necho ran > '" + marker + "'\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	wrong := strings.Repeat("ab", 32)
	if c, err := Start(ctx, bin, WithSHA256(wrong), WithStartTimeout(20*time.Second)); err == nil {
		c.Close()
		t.Fatal("Start with a wrong checksum succeeded")
	} else if !strings.Contains(strings.ToLower(err.Error()), "checksum") {
		t.Fatalf("Start with a wrong checksum: %v, want a checksum error", err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the binary ran although its checksum did not match (marker: %v)", err)
	}
	// Control: with its right checksum the same binary does run.
	if c, err := Start(ctx, bin, WithSHA256(fileSHA256(t, bin)), WithStartTimeout(20*time.Second)); err == nil {
		c.Close()
		t.Fatal("Start of a script that is no driver succeeded")
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control: the binary with the right checksum did not run: %v", err)
	}
}
