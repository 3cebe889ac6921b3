package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Serve accepts Kafka client connections on ln until the broker is closed
// (it then returns nil) or ln fails. The connections are plaintext and
// unauthenticated (Kafka's PLAINTEXT); ServeListener secures them.
func (b *Broker) Serve(ln net.Listener) error { return b.serve(ln, nil) }

// serve accepts connections on ln, secured as sl says (nil: plaintext).
func (b *Broker) serve(ln net.Listener, sl *SecureListener) error {
	b.connMu.Lock()
	if b.closed.Load() {
		b.connMu.Unlock()
		return nil
	}
	b.lns[ln] = struct{}{}
	b.connMu.Unlock()
	b.log.Info("serving the Kafka protocol", "listen", ln.Addr().String(), "advertise", sl.advertise(b), "security", sl.protocol())
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if b.closed.Load() {
				return nil
			}
			if !retryAccept(err) {
				return fmt.Errorf("broker: accepting on %s: %w", ln.Addr(), err)
			}
			// Out of file descriptors or buffers: back off and retry, as
			// net/http does, so that the broker keeps serving the
			// connections it has and accepts again once some close.
			if delay == 0 {
				b.log.Warn("accepting connections failed; retrying with backoff", "listen", ln.Addr().String(), "err", err)
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !b.admit(c) {
			_ = c.Close()
			if b.closed.Load() {
				return nil
			}
			continue
		}
		b.metrics.connections.Add(1)
		b.wg.Add(1)
		go b.serveConn(c, sl)
	}
}

// retryAccept reports whether an Accept error is transient: a timeout, or
// the process or system out of file descriptors or memory for sockets.
func retryAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// admit registers a new connection unless the broker is closed or it is
// over MaxConnections or MaxConnectionsPerIP.
func (b *Broker) admit(c net.Conn) bool {
	ip := remoteIP(c)
	b.connMu.Lock()
	defer b.connMu.Unlock()
	switch {
	case b.closed.Load():
		return false
	case len(b.conns) >= b.cfg.MaxConnections:
		b.log.Debug("closing connection: too many connections", "remote", c.RemoteAddr().String(), "max", b.cfg.MaxConnections)
		return false
	case b.perIP[ip] >= b.cfg.MaxConnectionsPerIP:
		b.log.Debug("closing connection: too many connections from its address", "remote", c.RemoteAddr().String(), "max", b.cfg.MaxConnectionsPerIP)
		return false
	}
	b.conns[c] = struct{}{}
	b.perIP[ip]++
	return true
}

// forget unregisters a closed connection.
func (b *Broker) forget(c net.Conn) {
	ip := remoteIP(c)
	b.connMu.Lock()
	delete(b.conns, c)
	if b.perIP[ip]--; b.perIP[ip] <= 0 {
		delete(b.perIP, ip)
	}
	b.connMu.Unlock()
}

// remoteIP is the client address of c without its port.
func remoteIP(c net.Conn) string {
	a := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
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
	// release gives back the response's bytes held in the broker's fetch
	// memory budget once it is written (nil: none held).
	release func()
	// records are a Fetch response's record batches, written from the
	// logs' buffers (fetchwire.go).
	records []partRecords
}

// conn is one client connection.
type conn struct {
	b        *Broker
	c        net.Conn
	remote   string
	clientID string
	// r reads requests from c.
	r *bufio.Reader
	// listener is how the connection was secured (nil: plaintext).
	listener *SecureListener
	// principal is who the client authenticated as ("User:ANONYMOUS"
	// unless TLS or SASL said otherwise).
	principal string
	// ctx ends when the client hangs up (or its input is bad): long polls
	// of the connection stop waiting, so its goroutines do not outlive it.
	ctx context.Context
	// busy counts requests read and not yet answered; lastWrite is when a
	// response was last written (unix ns). A connection is idle when busy
	// is 0 and lastWrite is older than IdleTimeout.
	busy      atomic.Int32
	lastWrite atomic.Int64
	// sessions are the connection's incremental fetch sessions.
	sessions connSessions
}

// maxInflightPerConn bounds the requests of one connection being handled
// at once: when that many await their responses, the connection is not
// read until the oldest is answered.
const maxInflightPerConn = 64

func (b *Broker) serveConn(nc net.Conn, sl *SecureListener) {
	defer b.wg.Done()
	ctx, hangUp := context.WithCancel(b.ctx)
	defer hangUp()
	cc := &conn{b: b, c: nc, remote: nc.RemoteAddr().String(), ctx: ctx, listener: sl, principal: anonymous}
	cc.r = bufio.NewReaderSize(nc, 64<<10)
	cc.lastWrite.Store(time.Now().UnixNano())
	defer b.closeSessions(cc)
	var err error
	if sl != nil {
		err = cc.secure(sl)
	}
	if err == nil {
		queue := make(chan *pending, maxInflightPerConn)
		writerDone := make(chan struct{})
		go cc.writeLoop(queue, writerDone)
		err = cc.readLoop(queue)
		hangUp()
		close(queue)
		<-writerDone
	}
	_ = nc.Close()
	b.forget(nc)
	b.metrics.connections.Add(-1)
	// readLoop always ends with an error (io.EOF when the client hung up).
	if !errors.Is(err, io.EOF) && !b.closed.Load() {
		b.log.Debug("connection closed", "remote", cc.remote, "client_id", cc.clientID, "err", err)
	}
}

// errIdle ends a connection that stayed idle past IdleTimeout.
var errIdle = errors.New("idle")

// readLoop reads request frames and starts their handling in order. It
// waits up to IdleTimeout for a request to begin; once its first byte
// arrived, the rest must arrive within RequestTimeout, and its body is
// allocated as it arrives, so a declared size holds no memory it was not
// sent.
func (cc *conn) readLoop(queue chan<- *pending) error {
	r := cc.r
	var sizeBuf [4]byte
	for {
		if err := cc.awaitRequest(r); err != nil {
			return err
		}
		_ = cc.c.SetReadDeadline(time.Now().Add(cc.b.cfg.RequestTimeout))
		if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
			return cc.readErr("size prefix", err)
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 8 || int64(size) > int64(cc.b.cfg.MaxRequestBytes) {
			cc.b.metrics.badFrames.Add(1)
			cc.b.log.Warn("closing connection: request size prefix out of range", "remote", cc.remote, "size", size, "max", cc.b.cfg.MaxRequestBytes)
			return fmt.Errorf("request size %d outside [8, %d]", size, cc.b.cfg.MaxRequestBytes)
		}
		p, malformed, err := cc.readRequest(r, int(size))
		if err != nil && !malformed {
			return cc.readErr(fmt.Sprintf("request of %d bytes", size), err)
		}
		cc.b.metrics.bytesIn.Add(int64(size) + 4)
		if err != nil {
			cc.b.metrics.badFrames.Add(1)
			cc.b.log.Warn("closing connection: malformed request", "remote", cc.remote, "client_id", cc.clientID, "err", err)
			return err
		}
		cc.busy.Add(1)
		queue <- p
	}
}

// readRequest reads a request frame of size bytes and starts handling it;
// malformed tells a frame that does not parse from one that did not
// arrive. A Produce request is read field by field (producewire.go),
// any other whole.
func (cc *conn) readRequest(r *bufio.Reader, size int) (p *pending, malformed bool, err error) {
	hdr, err := r.Peek(4)
	if err != nil {
		return nil, false, err
	}
	if cc.produceWire(hdr) {
		p, err = cc.readProduce(r, size)
		return p, errors.Is(err, errFrame), err
	}
	frame, err := readBody(r, size, cc.b.bodyMem)
	if err != nil {
		return nil, false, err
	}
	p, err = cc.decode(frame)
	return p, err != nil, err
}

// awaitRequest waits for the first byte of the next request: without
// limit while requests of the connection are pending, else until the
// connection has been idle for IdleTimeout.
func (cc *conn) awaitRequest(r *bufio.Reader) error {
	idle := cc.b.cfg.IdleTimeout
	for r.Buffered() == 0 {
		deadline := time.Unix(0, cc.lastWrite.Load()).Add(idle)
		if cc.busy.Load() > 0 {
			deadline = time.Now().Add(idle) // a long poll: not idle
		}
		_ = cc.c.SetReadDeadline(deadline)
		_, err := r.Peek(1)
		if err == nil {
			break
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return err
		}
		if cc.busy.Load() == 0 && time.Since(time.Unix(0, cc.lastWrite.Load())) >= idle {
			cc.b.log.Debug("closing idle connection", "remote", cc.remote, "client_id", cc.clientID, "idle", idle)
			return fmt.Errorf("no request for %s: %w", idle, errIdle)
		}
	}
	return nil
}

// readErr names what a read of a request was cut short in.
func (cc *conn) readErr(what string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		cc.b.log.Warn("closing connection: request not received within the request timeout", "remote", cc.remote, "client_id", cc.clientID, "request", what, "timeout", cc.b.cfg.RequestTimeout)
		return fmt.Errorf("reading %s: not received within %s: %w", what, cc.b.cfg.RequestTimeout, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("reading %s: %w", what, err)
	}
	return err
}

// firstBodyAlloc is the buffer a request body starts in when it cannot
// be allocated whole; it doubles as bytes arrive, up to the declared size.
const firstBodyAlloc = 64 << 10

// bodyMemBytes is what bodies still arriving may hold, over all
// connections, when allocated at their declared size (Broker.bodyMem).
const bodyMemBytes = 64 << 20

// readBody reads a request body of size bytes. While the broker's budget
// for bodies in flight (bodyMem) has room, the body is allocated at its
// declared size and read in place; past it the buffer grows as the bytes
// arrive rather than by what the prefix declares, so that connections
// declaring large requests and sending little hold little. Growing copies
// the body about twice and clears 2.7 times its size, what a Produce
// request of megabytes cost the broker under load.
func readBody(r io.Reader, size int, budget *byteBudget) ([]byte, error) {
	if size > firstBodyAlloc && budget.tryAcquire(int64(size)) {
		defer budget.release(int64(size))
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	buf := make([]byte, min(size, firstBodyAlloc))
	n := 0
	for {
		m, err := io.ReadFull(r, buf[n:])
		if err == io.EOF && n > 0 {
			err = io.ErrUnexpectedEOF // cut where the buffer grew
		}
		n += m
		if err != nil {
			return nil, err
		}
		if n == size {
			return buf, nil
		}
		next := make([]byte, min(size, 2*len(buf)))
		copy(next, buf)
		buf = next
	}
}

// decode parses one frame and starts handling it.
func (cc *conn) decode(frame []byte) (*pending, error) {
	p, req, resp, err := cc.parse(frame)
	if err != nil || req == nil {
		return p, err
	}
	finish := cc.b.handle(cc, p, req, resp)
	go func() {
		defer close(p.done)
		p.resp = finish()
	}()
	return p, nil
}

// parse parses one frame. A request of an unknown API or version is
// answered at once: p is done and req nil.
func (cc *conn) parse(frame []byte) (p *pending, req kmsg.Request, resp kmsg.Response, err error) {
	key := int16(binary.BigEndian.Uint16(frame[0:]))
	ver := int16(binary.BigEndian.Uint16(frame[2:]))
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	p = &pending{done: make(chan struct{}), corr: corr, key: key, start: time.Now()}
	body := frame[8:]
	if len(body) < 2 {
		return nil, nil, nil, errors.New("truncated client id")
	}
	n := int16(binary.BigEndian.Uint16(body))
	body = body[2:]
	if n > 0 {
		if int(n) > len(body) {
			return nil, nil, nil, errors.New("truncated client id")
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
		return p, nil, nil, nil
	}
	req = kmsg.RequestForKey(key)
	req.SetVersion(ver)
	if req.IsFlexible() {
		rest, err := skipTags(body)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s v%d request header: %w", kmsg.NameForKey(key), ver, err)
		}
		body = rest
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, nil, nil, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(key), ver, err)
	}
	resp = req.ResponseKind()
	resp.SetVersion(ver)
	p.header = resp.IsFlexible() && key != kmsg.ApiVersions.Int16()
	return p, req, resp, nil
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

// writeLoop writes responses in request order; a response that cannot be
// written within RequestTimeout (a client that does not read) closes the
// connection.
func (cc *conn) writeLoop(queue <-chan *pending, done chan<- struct{}) {
	defer close(done)
	w := bufio.NewWriterSize(cc.c, 64<<10)
	var buf []byte
	failed := false
	fail := func(err error) {
		if !failed {
			failed = true
			_ = cc.c.Close()
			cc.b.log.Debug("closing connection: writing a response failed", "remote", cc.remote, "client_id", cc.clientID, "err", err)
		}
	}
	flush := func() {
		if w.Buffered() > 0 && !failed {
			_ = cc.c.SetWriteDeadline(time.Now().Add(cc.b.cfg.RequestTimeout))
			if err := w.Flush(); err != nil {
				fail(err)
			}
		}
	}
	for p := range queue {
		select {
		case <-p.done:
		default:
			// About to wait (a long poll): send the responses already
			// written, so they do not wait behind it.
			flush()
			<-p.done
		}
		cc.write(w, p, &buf, failed, fail)
		if p.release != nil {
			p.release()
		}
		cc.busy.Add(-1)
		cc.lastWrite.Store(time.Now().UnixNano())
		if len(queue) == 0 {
			flush()
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
	flush()
}

// write encodes p's response into buf and writes it to w (unless writing
// already failed or there is no response).
func (cc *conn) write(w *bufio.Writer, p *pending, buf *[]byte, failed bool, fail func(error)) {
	cc.b.metrics.latency(p.key, time.Since(p.start))
	if failed || (p.resp == nil && p.raw == nil) {
		return
	}
	b := append((*buf)[:0], 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(p.corr))
	if p.header {
		b = append(b, 0)
	}
	var segs net.Buffers
	if fr, ok := p.resp.(*kmsg.FetchResponse); ok && len(p.records) > 0 {
		if segs, ok = appendFetch(b, fr, p.records); !ok {
			materialize(fr, p.records)
		}
	}
	switch {
	case segs != nil:
		// The record batches go out from the logs' buffers: the encoded
		// fields and the batches in one writev, after what w holds.
		n := 0
		for _, s := range segs {
			n += len(s)
		}
		b = segs[0][:4]
		binary.BigEndian.PutUint32(b, uint32(n-4))
		*buf = segs[0][:0]
		cc.b.metrics.bytesOut.Add(int64(n))
		_ = cc.c.SetWriteDeadline(time.Now().Add(cc.b.cfg.RequestTimeout))
		if err := w.Flush(); err != nil {
			fail(err)
			return
		}
		if _, err := segs.WriteTo(cc.c); err != nil {
			fail(err)
		}
		return
	case p.resp != nil:
		if n := fetchResponseBytes(p.resp); cap(b) < len(b)+n {
			// Sized once: growing a buffer of megabytes by doubling copied
			// each fetch response several times over.
			b = append(make([]byte, 0, len(b)+n), b...)
		}
		b = p.resp.AppendTo(b)
	default:
		b = append(b, p.raw...)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	*buf = b
	cc.b.metrics.bytesOut.Add(int64(len(b)))
	_ = cc.c.SetWriteDeadline(time.Now().Add(cc.b.cfg.RequestTimeout))
	if _, err := w.Write(b); err != nil {
		fail(err)
	}
}

// fetchResponseBytes estimates the encoded size of a Fetch response (its
// record bytes and a little per partition); 0 for other responses.
func fetchResponseBytes(r kmsg.Response) int {
	f, ok := r.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	n := 64
	for _, t := range f.Topics {
		n += 64 + len(t.Topic)
		for _, p := range t.Partitions {
			n += 64 + len(p.RecordBatches) + 32*len(p.AbortedTransactions)
		}
	}
	return n
}

// reqCtx is the context of a request's work: the broker's, bounded.
func (b *Broker) reqCtx(timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return context.WithTimeout(b.ctx, timeout)
}
