package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"testing/iotest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/drivers/memory"
)

// memBrokerWith runs a broker on a memory store with cfg changed by mod.
func memBrokerWith(t *testing.T, mod func(*Config)) (*Broker, string) {
	t.Helper()
	st, err := memory.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return startBroker(t, st, mod)
}

// TestSilentConnectionsClosed: with max_connections 5, five connections
// that never send a byte are closed after IdleTimeout, and a client can
// connect again (a slowloris cannot hold every slot).
func TestSilentConnectionsClosed(t *testing.T) {
	_, addr := memBrokerWith(t, func(c *Config) {
		c.MaxConnections = 5
		c.IdleTimeout = 300 * time.Millisecond
	})
	var silent []net.Conn
	for range 5 {
		silent = append(silent, dial(t, addr))
	}
	for _, c := range silent {
		expectClosed(t, c)
	}
	apiVersionsOK(t, addr)
}

// TestLongPollIsNotIdle: a connection whose only request is a Fetch
// waiting longer than IdleTimeout gets its answer; the connection is not
// closed as idle while a request is pending.
func TestLongPollIsNotIdle(t *testing.T) {
	_, addr := memBrokerWith(t, func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
	createTopic(t, newClient(t, addr), "idle", 1, nil)
	c := dial(t, addr)
	if _, err := c.Write(rawFrame(1, 4, 3, idleFetch("idle", 1500*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(readFrame(t, c))); corr != 3 {
		t.Fatalf("correlation id %d, want 3", corr)
	}
	// Still open right after the answer.
	if _, err := c.Write(rawFrame(18, 0, 4, nil)); err != nil {
		t.Fatal(err)
	}
	readFrame(t, c)
}

// TestSlowRequestBodyClosed: a client that sends a size prefix and part of
// the body, then nothing, is closed after RequestTimeout.
func TestSlowRequestBodyClosed(t *testing.T) {
	_, addr := memBrokerWith(t, func(c *Config) { c.RequestTimeout = 300 * time.Millisecond })
	c := dial(t, addr)
	frame := rawFrame(18, 0, 1, make([]byte, 1000))
	if _, err := c.Write(frame[:20]); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	apiVersionsOK(t, addr)
}

// TestDeclaredSize: connections that declare large requests and send 100
// bytes of them make the broker hold neither what they declare nor more
// than the budget of bodies allocated at their declared size: ten
// declaring 100 MiB each (past the budget: bodies grow as bytes arrive)
// not 1 GB, twenty declaring 8 MiB each not 160 MiB.
func TestDeclaredSize(t *testing.T) {
	for _, c := range []struct {
		conns    int
		declared uint32
		limit    int64
	}{
		{10, 100 << 20, 64 << 20},
		{20, 8 << 20, bodyMemBytes + 8<<20},
	} {
		_, addr := memBrokerWith(t, nil)
		apiVersionsOK(t, addr)
		before := heapInUse()
		var conns []net.Conn
		for range c.conns {
			conn := dial(t, addr)
			prefix := binary.BigEndian.AppendUint32(nil, c.declared)
			if _, err := conn.Write(append(prefix, make([]byte, 100)...)); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn)
		}
		// The broker reads each prefix at once; give its goroutines time
		// to get to the body.
		time.Sleep(500 * time.Millisecond)
		grew := int64(heapInUse()) - int64(before)
		t.Logf("heap grew %d KiB with %d connections each declaring %d MiB", grew>>10, c.conns, c.declared>>20)
		if grew > c.limit {
			t.Fatalf("heap grew %d MiB with %d connections that sent 100 bytes of a declared %d MiB each; limit %d MiB", grew>>20, c.conns, c.declared>>20, c.limit>>20)
		}
		runtime.KeepAlive(conns)
	}
}

// TestReadBody: bodies around and past the first buffer come back whole
// and byte for byte, allocated at their size (budget room) or grown as
// they arrive (none), over reads that return a few bytes at a time; a body
// cut short is an error and gives its budget back.
func TestReadBody(t *testing.T) {
	for _, room := range []int64{0, 64 << 20} {
		budget := newByteBudget(room)
		for _, size := range []int{8, firstBodyAlloc - 1, firstBodyAlloc, firstBodyAlloc + 1, 2 * firstBodyAlloc, 3*firstBodyAlloc + 17, 40 * firstBodyAlloc} {
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(i*7 + i>>16)
			}
			got, err := readBody(iotest.HalfReader(bytes.NewReader(want)), size, budget)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("room %d, size %d: got %d bytes, equal %v, err %v", room, size, len(got), bytes.Equal(got, want), err)
			}
			if _, err := readBody(bytes.NewReader(want[:size-1]), size, budget); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("room %d, size %d, one byte short: err %v, want io.ErrUnexpectedEOF", room, size, err)
			}
			if budget.used != 0 {
				t.Fatalf("room %d, size %d: %d bytes of the budget still held", room, size, budget.used)
			}
		}
	}
}

// TestMaxConnectionsPerIP: with MaxConnectionsPerIP 2, a third connection
// from 127.0.0.1 is closed at once, while one from another address
// (127.0.0.2) is served.
func TestMaxConnectionsPerIP(t *testing.T) {
	_, addr := memBrokerWith(t, func(c *Config) { c.MaxConnectionsPerIP = 2 })
	for i := range 2 {
		c := dial(t, addr)
		if _, err := c.Write(rawFrame(18, 0, int32(i), nil)); err != nil {
			t.Fatal(err)
		}
		readFrame(t, c) // served, so registered before the next dial
	}
	over := dial(t, addr)
	_, _ = over.Write(rawFrame(18, 0, 9, nil))
	expectClosed(t, over)

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	other, err := d.Dial("tcp", addr)
	if err != nil {
		// Linux routes all of 127/8 to loopback; elsewhere it may not.
		if os.Getenv("STRATA_FULL_TESTS") != "" {
			t.Fatalf("cannot dial from 127.0.0.2 and STRATA_FULL_TESTS is set: %v", err)
		}
		t.Skipf("cannot dial from 127.0.0.2 (this system does not route 127/8 to loopback): %v", err)
	}
	defer other.Close()
	if _, err := other.Write(rawFrame(18, 0, 10, nil)); err != nil {
		t.Fatal(err)
	}
	var av kmsg.ApiVersionsResponse
	if err := av.ReadFrom(readFrame(t, other)[4:]); err != nil || av.ErrorCode != 0 {
		t.Fatalf("ApiVersions from another address: %v code %d", err, av.ErrorCode)
	}
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
