package hdfs

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream"
)

// TestOpenUnreachableNameNode: nothing listens on the address; Open fails
// with ErrUnavailable naming it, within the connect timeout (no hang).
func TestOpenUnreachableNameNode(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := Config{NameNodes: []string{addr}, User: "strata", Timeouts: Timeouts{Connect: time.Second, Operation: 2 * time.Second}}
	_, err = OpenStorage(t.Context(), cfg)
	if !errors.Is(err, stream.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("OpenStorage on %s = %v, want ErrUnavailable naming the address", addr, err)
	}
	t.Logf("unreachable: %v", err)
}

// TestOpenPermissionDenied: a user who may not write under the root fails
// Open with the permission named, not later on the first append.
func TestOpenPermissionDenied(t *testing.T) {
	admin := freshConfig(t) // the testbed user is the HDFS superuser
	st, err := OpenStorage(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	guest := admin
	guest.User = "strata-guest"
	guest.Root = path.Join(admin.Root, "private")
	_, err = Open(t.Context(), marshal(t, guest))
	if !errors.Is(err, stream.ErrUnavailable) || !strings.Contains(err.Error(), "permission denied") ||
		!strings.Contains(err.Error(), "strata-guest") {
		t.Fatalf("Open as strata-guest under %s = %v, want ErrUnavailable naming permission denied and the user", guest.Root, err)
	}
	t.Logf("permission: %v", err)
}

// TestSafeMode: with the NameNode in safe mode, Open fails and a put of an
// open Storage fails, both ErrUnavailable naming safe mode; reads still
// work; after safe mode puts work again.
func TestSafeMode(t *testing.T) {
	cfg := freshConfig(t)
	st, err := OpenStorage(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	if err := st.PutIfAbsent(ctx, "a/1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	drivertest.Ctl(t, "hdfs", "enter-safemode")
	left := false
	leave := func() {
		if !left {
			left = true
			drivertest.Ctl(t, "hdfs", "leave-safemode")
		}
	}
	defer leave()

	err = st.PutIfAbsent(ctx, "a/2", []byte("two"))
	if !errors.Is(err, stream.ErrUnavailable) || !strings.Contains(err.Error(), "safe mode") {
		t.Fatalf("PutIfAbsent in safe mode = %v, want ErrUnavailable naming safe mode", err)
	}
	t.Logf("put in safe mode: %v", err)
	_, err = Open(ctx, marshal(t, cfg))
	if !errors.Is(err, stream.ErrUnavailable) || !strings.Contains(err.Error(), "safe mode") {
		t.Fatalf("Open in safe mode = %v, want ErrUnavailable naming safe mode", err)
	}
	if b, err := st.Get(ctx, "a/1", 0, -1); err != nil || string(b) != "one" {
		t.Fatalf("Get in safe mode = %q, %v; want one", b, err)
	}
	leave()
	if err := st.PutIfAbsent(ctx, "a/2", []byte("two")); err != nil {
		t.Fatalf("PutIfAbsent after safe mode: %v", err)
	}
}

// TestUnclosedFileNeverVisible: a put whose writer died mid-write leaves an
// unclosed file in the temp area. It is never listed, read or counted as
// the key, the key can still be taken, and the file is swept once older
// than TempMaxAge.
func TestUnclosedFileNeverVisible(t *testing.T) {
	cfg := freshConfig(t)
	cfg.Timeouts.Operation = time.Second
	cfg.TempMaxAge = 2 * time.Second
	ctx := context.Background()
	st, err := OpenStorage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// A writer that dies: a client of its own that creates the temp object,
	// writes, and goes away without closing the file.
	dead, err := newClients(Config{NameNodes: cfg.NameNodes, User: cfg.User, Connections: 1, Timeouts: cfg.Timeouts})
	if err != nil {
		t.Fatal(err)
	}
	c := dead.pick()
	dir := path.Join(st.tmp, "DEAD"+rand.Text())
	if err := c.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := c.CreateFile(path.Join(dir, objectName), 1, st.blockSize, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("half a chunk")); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	dead.close() // dies: no Close of the file, lease no longer renewed
	// Once the test is over, end the dead writer's block stream goroutines
	// (a real crash ends them with its process); the Close itself fails.
	defer func() { _ = w.Close() }()

	keys, err := st.List(ctx, "", "", 0)
	if err != nil || len(keys) != 0 {
		t.Fatalf("List with an unclosed temp file = %q, %v; want none", keys, err)
	}
	if err := st.PutIfAbsent(ctx, "k", []byte("whole")); err != nil {
		t.Fatalf("PutIfAbsent next to an unclosed temp file: %v", err)
	}
	if b, err := st.Get(ctx, "k", 0, -1); err != nil || string(b) != "whole" {
		t.Fatalf("Get = %q, %v; want whole", b, err)
	}

	time.Sleep(cfg.TempMaxAge + 500*time.Millisecond)
	st2, err := OpenStorage(ctx, cfg) // sweeps on open
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if st2.Swept() < 1 {
		t.Errorf("Swept() = %d after TempMaxAge, want >= 1", st2.Swept())
	}
	if _, err := st2.pool.pick().Stat(dir); err == nil {
		t.Errorf("temp dir %s of the dead writer is still there after the sweep", dir)
	}
	keys, err = st2.List(ctx, "", "", 0)
	if err != nil || len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("List after the sweep = %q, %v; want [k]", keys, err)
	}
}

// TestBadKeys: keys the layout cannot hold are refused before any I/O.
func TestBadKeys(t *testing.T) {
	st, err := OpenStorage(t.Context(), freshConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, k := range []string{"", "/abs", "a/", "a//b", "a/@object", "../up", "a/../b", "a/./b"} {
		if err := st.PutIfAbsent(t.Context(), k, []byte("x")); !errors.Is(err, stream.ErrInvalidArgument) {
			t.Errorf("PutIfAbsent(%q) = %v, want ErrInvalidArgument", k, err)
		}
	}
}

// TestOpenSilentNameNode: a NameNode address that accepts connections but
// never answers (a hung process, a wrong service) fails Open with
// ErrUnavailable within the operation timeout, instead of hanging.
func TestOpenSilentNameNode(t *testing.T) {
	cfg := Config{NameNodes: []string{drivertest.SilentServer(t)}, User: "strata",
		Timeouts: Timeouts{Connect: time.Second, Operation: time.Second}}
	start := time.Now()
	_, err := OpenStorage(context.Background(), cfg)
	if !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("OpenStorage on a silent NameNode = %v, want ErrUnavailable", err)
	}
	t.Logf("silent NameNode, after %v: %v", time.Since(start), err)
}
