package broker

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/drivers/memory"
)

// rawRequest writes one frame (key, version, correlation id, client id,
// body) and returns the connection.
func rawFrame(key, version int16, corr int32, body []byte) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if (&kmsg.ApiVersionsRequest{Version: version}).IsFlexible() && key == 18 {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readFrame reads one response frame.
func readFrame(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		t.Fatalf("reading response size: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return b
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// expectClosed asserts the broker closed c.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err == nil {
		t.Fatalf("connection still open after bad input")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection not closed after bad input: %v", err)
	}
}

// apiVersionsOK checks the broker still answers on a fresh connection.
func apiVersionsOK(t *testing.T, addr string) {
	t.Helper()
	c := dial(t, addr)
	if _, err := c.Write(rawFrame(18, 3, 7, []byte{2, 'x', 2, '1', 0})); err != nil {
		t.Fatal(err)
	}
	resp := readFrame(t, c)
	if corr := int32(binary.BigEndian.Uint32(resp)); corr != 7 {
		t.Fatalf("correlation id %d, want 7", corr)
	}
	var av kmsg.ApiVersionsResponse
	av.Version = 3
	if err := av.ReadFrom(resp[4:]); err != nil || av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v3: %v code %d keys %d", err, av.ErrorCode, len(av.ApiKeys))
	}
}

func memBroker(t *testing.T) string {
	_, addr := memBrokerWith(t, nil)
	return addr
}

func TestBadInput(t *testing.T) {
	addr := memBroker(t)
	t.Run("size prefix over the max closes only that connection", func(t *testing.T) {
		c := dial(t, addr)
		other := dial(t, addr)
		if _, err := c.Write([]byte{0x7f, 0xff, 0xff, 0xff}); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
		if _, err := other.Write(rawFrame(18, 0, 1, nil)); err != nil {
			t.Fatal(err)
		}
		readFrame(t, other)
	})
	t.Run("negative size prefix", func(t *testing.T) {
		c := dial(t, addr)
		_, _ = c.Write([]byte{0xff, 0xff, 0xff, 0xf0})
		expectClosed(t, c)
	})
	t.Run("unknown api key gets UNSUPPORTED_VERSION and the connection stays", func(t *testing.T) {
		c := dial(t, addr)
		_, _ = c.Write(rawFrame(9999, 0, 42, nil))
		resp := readFrame(t, c)
		if corr := int32(binary.BigEndian.Uint32(resp)); corr != 42 {
			t.Fatalf("correlation id %d", corr)
		}
		if code := int16(binary.BigEndian.Uint16(resp[4:])); code != kerr.UnsupportedVersion.Code {
			t.Fatalf("code %d, want UNSUPPORTED_VERSION", code)
		}
		_, _ = c.Write(rawFrame(18, 0, 43, nil))
		readFrame(t, c)
	})
	t.Run("ApiVersions above our max answers v0 with our versions", func(t *testing.T) {
		c := dial(t, addr)
		_, _ = c.Write(rawFrame(18, 99, 5, nil))
		resp := readFrame(t, c)
		var av kmsg.ApiVersionsResponse
		if err := av.ReadFrom(resp[4:]); err != nil {
			t.Fatal(err)
		}
		if av.ErrorCode != kerr.UnsupportedVersion.Code || len(av.ApiKeys) != len(supported) {
			t.Fatalf("code %d, %d keys", av.ErrorCode, len(av.ApiKeys))
		}
	})
	t.Run("Produce below our min version", func(t *testing.T) {
		c := dial(t, addr)
		_, _ = c.Write(rawFrame(0, 0, 9, []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}))
		resp := readFrame(t, c)
		if code := int16(binary.BigEndian.Uint16(resp[4:])); code != kerr.UnsupportedVersion.Code {
			t.Fatalf("code %d", code)
		}
	})
	t.Run("garbage body closes only that connection", func(t *testing.T) {
		c := dial(t, addr)
		_, _ = c.Write(rawFrame(3, 1, 1, []byte{0x7f, 0xff, 0xff, 0xff, 1, 2}))
		expectClosed(t, c)
		apiVersionsOK(t, addr)
	})
	t.Run("truncated header", func(t *testing.T) {
		c := dial(t, addr)
		_, _ = c.Write([]byte{0, 0, 0, 9, 0, 3, 0, 1, 0, 0, 0, 1, 0x7f})
		expectClosed(t, c)
		apiVersionsOK(t, addr)
	})
}

// FuzzRequestFrame sends arbitrary bytes on one connection: the broker may
// close it but must keep serving others.
func FuzzRequestFrame(f *testing.F) {
	f.Add(rawFrame(18, 3, 1, []byte{2, 'x', 2, '1', 0}))
	f.Add(rawFrame(3, 12, 1, []byte{0, 0, 0}))
	f.Add(rawFrame(0, 9, 1, []byte{0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0}))
	f.Add(rawFrame(11, 9, 1, []byte{1, 2, 3}))
	f.Add([]byte{0, 0, 0, 8, 0, 1, 0, 4, 0, 0, 0, 1})
	st, err := memory.Open(context.Background(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	_, addr := startBroker(f, st, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(data)
		// Hang up our side: the broker answers what it read, ends any long
		// poll and closes, so the read ends at EOF instead of waiting out a
		// deadline for every frame that leaves the connection open. The
		// deadline only guards against a broker that never closes.
		_ = c.(*net.TCPConn).CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
		apiVersionsOK(t, addr)
	})
}

// idleFetch is a Fetch v4 of partition 0 of topic that waits up to wait
// for a byte.
func idleFetch(topic string, wait time.Duration) []byte {
	req := kmsg.NewFetchRequest()
	req.Version = 4
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req.AppendTo(nil)
}

// TestResponsesNotHeldBehindLongPoll: responses to requests pipelined
// before a long-poll Fetch are sent while the Fetch still waits.
func TestResponsesNotHeldBehindLongPoll(t *testing.T) {
	addr := memBroker(t)
	createTopic(t, newClient(t, addr), "idle", 1, nil)
	c := dial(t, addr)
	// Many in one write, so the writer finds the Fetch queued behind them.
	var frames []byte
	for i := range 20 {
		frames = append(frames, rawFrame(18, 0, int32(i), nil)...)
	}
	frames = append(frames, rawFrame(1, 4, 20, idleFetch("idle", time.Hour))...)
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if corr := int32(binary.BigEndian.Uint32(readFrame(t, c))); corr != int32(i) {
			t.Fatalf("correlation id %d, want %d", corr, i)
		}
	}
}

// TestHangUpEndsLongPoll: a client that sends a Fetch waiting an hour for
// data and hangs up gets its answer at once and the connection closed; the
// long poll does not keep the connection's goroutines (and its slot under
// max_connections) for the hour.
func TestHangUpEndsLongPoll(t *testing.T) {
	addr := memBroker(t)
	createTopic(t, newClient(t, addr), "idle", 1, nil)
	c := dial(t, addr)
	if _, err := c.Write(rawFrame(1, 4, 11, idleFetch("idle", time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp := readFrame(t, c)
	if corr := int32(binary.BigEndian.Uint32(resp)); corr != 11 {
		t.Fatalf("correlation id %d, want 11", corr)
	}
	fr := kmsg.NewFetchResponse()
	fr.Version = 4
	if err := fr.ReadFrom(resp[4:]); err != nil || len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("Fetch response: %v %+v", err, fr)
	}
	expectClosed(t, c)
}
