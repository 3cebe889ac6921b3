package broker

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"runtime"
	"testing"
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

// TestDeclaredSizeNotAllocated: ten connections declaring 100 MiB requests
// and sending 100 bytes of them do not make the broker hold 1 GB: a
// request body is allocated as its bytes arrive.
func TestDeclaredSizeNotAllocated(t *testing.T) {
	_, addr := memBrokerWith(t, nil)
	apiVersionsOK(t, addr)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	var conns []net.Conn
	for range 10 {
		c := dial(t, addr)
		prefix := binary.BigEndian.AppendUint32(nil, 100<<20)
		if _, err := c.Write(append(prefix, make([]byte, 100)...)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The broker reads each prefix at once; give its goroutines time to
	// get to the body.
	time.Sleep(500 * time.Millisecond)
	after := heap()
	grew := int64(after) - int64(before)
	t.Logf("heap grew %d KiB with 10 connections each declaring 100 MiB", grew>>10)
	if grew > 64<<20 {
		t.Fatalf("heap grew %d MiB with 10 connections that sent 100 bytes of a declared 100 MiB each", grew>>20)
	}
	runtime.KeepAlive(conns)
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
