package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Serve accepts Kafka client connections on ln until the broker is closed
// (it then returns nil) or ln fails.
func (b *Broker) Serve(ln net.Listener) error {
	b.connMu.Lock()
	if b.closed.Load() {
		b.connMu.Unlock()
		return nil
	}
	b.lns[ln] = struct{}{}
	b.connMu.Unlock()
	b.log.Info("serving the Kafka protocol", "listen", ln.Addr().String(), "advertise", b.cfg.Advertise)
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if b.closed.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("broker: accepting on %s: %w", ln.Addr(), err)
		}
		delay = 0
		b.connMu.Lock()
		if b.closed.Load() {
			b.connMu.Unlock()
			_ = c.Close()
			return nil
		}
		if len(b.conns) >= b.cfg.MaxConnections {
			b.connMu.Unlock()
			b.log.Debug("closing connection: too many connections", "remote", c.RemoteAddr().String(), "max", b.cfg.MaxConnections)
			_ = c.Close()
			continue
		}
		b.conns[c] = struct{}{}
		b.connMu.Unlock()
		b.metrics.connections.Add(1)
		b.wg.Add(1)
		go b.serveConn(c)
	}
}

// pending is one request's response, completed by its own goroutine and
// written in request order.
type pending struct {
	done   chan struct{}
	corr   int32
	key    int16
	resp   kmsg.Response // nil: no response (acks=0)
	raw    []byte        // a pre-encoded body (errors for unsupported versions)
	header bool          // the response header is flexible (tagged fields)
	start  time.Time
}

// conn is one client connection.
type conn struct {
	b        *Broker
	c        net.Conn
	remote   string
	clientID string
	// ctx ends when the client hangs up (or its input is bad): long polls
	// of the connection stop waiting, so its goroutines do not outlive it.
	ctx context.Context
}

// maxInflightPerConn bounds the requests of one connection being handled
// at once: when that many await their responses, the connection is not
// read until the oldest is answered.
const maxInflightPerConn = 64

func (b *Broker) serveConn(nc net.Conn) {
	defer b.wg.Done()
	ctx, hangUp := context.WithCancel(b.ctx)
	defer hangUp()
	cc := &conn{b: b, c: nc, remote: nc.RemoteAddr().String(), ctx: ctx}
	queue := make(chan *pending, maxInflightPerConn)
	writerDone := make(chan struct{})
	go cc.writeLoop(queue, writerDone)
	err := cc.readLoop(queue)
	hangUp()
	close(queue)
	<-writerDone
	_ = nc.Close()
	b.connMu.Lock()
	delete(b.conns, nc)
	b.connMu.Unlock()
	b.metrics.connections.Add(-1)
	// readLoop always ends with an error (io.EOF when the client hung up).
	if !errors.Is(err, io.EOF) && !b.closed.Load() {
		b.log.Debug("connection closed", "remote", cc.remote, "client_id", cc.clientID, "err", err)
	}
}

// readLoop reads request frames and starts their handling in order.
func (cc *conn) readLoop(queue chan<- *pending) error {
	r := bufio.NewReaderSize(cc.c, 64<<10)
	var sizeBuf [4]byte
	for {
		if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 8 || int64(size) > int64(cc.b.cfg.MaxRequestBytes) {
			cc.b.metrics.badFrames.Add(1)
			cc.b.log.Warn("closing connection: request size prefix out of range", "remote", cc.remote, "size", size, "max", cc.b.cfg.MaxRequestBytes)
			return fmt.Errorf("request size %d outside [8, %d]", size, cc.b.cfg.MaxRequestBytes)
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(r, frame); err != nil {
			return err
		}
		cc.b.metrics.bytesIn.Add(int64(size) + 4)
		p, err := cc.decode(frame)
		if err != nil {
			cc.b.metrics.badFrames.Add(1)
			cc.b.log.Warn("closing connection: malformed request", "remote", cc.remote, "client_id", cc.clientID, "err", err)
			return err
		}
		queue <- p
	}
}

// decode parses one frame and starts handling it.
func (cc *conn) decode(frame []byte) (*pending, error) {
	key := int16(binary.BigEndian.Uint16(frame[0:]))
	ver := int16(binary.BigEndian.Uint16(frame[2:]))
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	p := &pending{done: make(chan struct{}), corr: corr, key: key, start: time.Now()}
	body := frame[8:]
	if len(body) < 2 {
		return nil, errors.New("truncated client id")
	}
	n := int16(binary.BigEndian.Uint16(body))
	body = body[2:]
	if n > 0 {
		if int(n) > len(body) {
			return nil, errors.New("truncated client id")
		}
		if cc.clientID == "" {
			cc.clientID = string(body[:n])
		}
		body = body[n:]
	}
	vr, known := supported[key]
	if !known || ver < vr.min || ver > vr.max {
		cc.b.metrics.request(key, kerr.UnsupportedVersion.Code)
		if key == kmsg.ApiVersions.Int16() {
			// Answer in v0, which every client can read, with the versions
			// we support (KIP-511).
			resp := apiVersionsResponse(0)
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			p.resp = resp
		} else {
			p.raw = binary.BigEndian.AppendUint16(nil, uint16(kerr.UnsupportedVersion.Code))
		}
		close(p.done)
		return p, nil
	}
	req := kmsg.RequestForKey(key)
	req.SetVersion(ver)
	if req.IsFlexible() {
		rest, err := skipTags(body)
		if err != nil {
			return nil, fmt.Errorf("%s v%d request header: %w", kmsg.NameForKey(key), ver, err)
		}
		body = rest
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(key), ver, err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(ver)
	p.header = resp.IsFlexible() && key != kmsg.ApiVersions.Int16()
	finish := cc.b.handle(cc, req, resp)
	go func() {
		defer close(p.done)
		p.resp = finish()
	}()
	return p, nil
}

// skipTags skips a flexible header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tagged field count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// writeLoop writes responses in request order.
func (cc *conn) writeLoop(queue <-chan *pending, done chan<- struct{}) {
	defer close(done)
	w := bufio.NewWriterSize(cc.c, 64<<10)
	var buf []byte
	failed := false
	for p := range queue {
		select {
		case <-p.done:
		default:
			// About to wait (a long poll): send the responses already
			// written, so they do not wait behind it.
			if w.Buffered() > 0 && !failed {
				if err := w.Flush(); err != nil {
					failed = true
					_ = cc.c.Close()
				}
			}
			<-p.done
		}
		cc.b.metrics.latency(p.key, time.Since(p.start))
		if failed || (p.resp == nil && p.raw == nil) {
			continue
		}
		buf = append(buf[:0], 0, 0, 0, 0)
		buf = binary.BigEndian.AppendUint32(buf, uint32(p.corr))
		if p.header {
			buf = append(buf, 0)
		}
		if p.resp != nil {
			buf = p.resp.AppendTo(buf)
		} else {
			buf = append(buf, p.raw...)
		}
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		cc.b.metrics.bytesOut.Add(int64(len(buf)))
		if _, err := w.Write(buf); err != nil {
			failed = true
			_ = cc.c.Close()
			continue
		}
		if len(queue) == 0 {
			if err := w.Flush(); err != nil {
				failed = true
				_ = cc.c.Close()
			}
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
	_ = w.Flush()
}

// reqCtx is the context of a request's work: the broker's, bounded.
func (b *Broker) reqCtx(timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return context.WithTimeout(b.ctx, timeout)
}
