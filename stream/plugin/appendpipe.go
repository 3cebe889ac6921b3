package plugin

import (
	"context"
	"fmt"
	"io"
	"math/bits"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// Limits of one session's append pipeline on the host: admission waits (on
// the caller's ctx) while this much is queued or in flight.
const (
	maxPipeBytes   = 64 << 20
	maxPipeAppends = 1 << 16
)

// maxBatchesPerMessage bounds the batches coalesced into one AppendRequest.
const maxBatchesPerMessage = 1024

// pendingAppend is one admitted append: its batch already encoded as an
// AppendRequest.batches field, and the completion of its future.
type pendingAppend struct {
	field    mem.Buffer // tag, length and the encoded streamv1.Batch
	wire     int        // field.Len()
	size     int        // Batch.Size, for the pipeline's byte budget
	count    uint32
	complete func(stream.AppendResult, error)
}

// batchFieldSize is the encoded size of one "batches" field (number 2) of
// an AppendRequest whose Batch encodes to n bytes.
func batchFieldSize(n int) int {
	return n + protowire.SizeTag(2) + protowire.SizeVarint(uint64(n))
}

// appendBatchField appends pb, whose encoding is n bytes, to buf as one
// "batches" field. Concatenated fields, optionally after a session field,
// are a valid AppendRequest.
func appendBatchField(buf []byte, pb *streamv1.Batch, n int) ([]byte, error) {
	buf = protowire.AppendTag(buf, 2, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(n))
	return proto.MarshalOptions{}.MarshalAppend(buf, pb)
}

// encodeBatchBuffer encodes pb as one "batches" field into a buffer of
// gRPC's pool. The bytes are a copy: the caller may reuse the payload as
// soon as Append returns. gRPC returns the buffer to the pool once the
// transport has written it, so large appends neither zero fresh memory nor
// feed the garbage collector.
func encodeBatchBuffer(pb *streamv1.Batch) (mem.Buffer, int, error) {
	n := proto.Size(pb)
	total := batchFieldSize(n)
	bp := encodePool.Get(total)
	buf, err := appendBatchField((*bp)[:0], pb, n)
	if err != nil {
		encodePool.Put(bp)
		return nil, 0, err
	}
	*bp = buf
	return mem.NewBuffer(bp, encodePool), len(buf), nil
}

// encodePool recycles the host's append buffers. Unlike gRPC's default pool
// it does not zero a buffer it hands out: encodeBatchBuffer overwrites every
// byte it sends.
var encodePool = newTieredPool()

// tieredPool is a mem.BufferPool with one sync.Pool per power-of-two size
// from 4 KiB up; smaller and larger buffers are plain allocations.
type tieredPool struct {
	tiers [17]sync.Pool // 4 KiB << i, up to 256 MiB
}

const minPoolShift = 12

func newTieredPool() *tieredPool { return &tieredPool{} }

// tier returns the index of the smallest tier holding n bytes, or -1.
func (p *tieredPool) tier(n int) int {
	if n <= 0 || n > 1<<(minPoolShift+len(p.tiers)-1) {
		return -1
	}
	i := max(bits.Len(uint(n-1))-minPoolShift, 0)
	return i
}

func (p *tieredPool) Get(n int) *[]byte {
	i := p.tier(n)
	if i < 0 {
		b := make([]byte, n)
		return &b
	}
	if bp, ok := p.tiers[i].Get().(*[]byte); ok {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, 1<<(minPoolShift+i))
	return &b
}

func (p *tieredPool) Put(bp *[]byte) {
	c := cap(*bp)
	i := p.tier(c)
	if i < 0 || c != 1<<(minPoolShift+i) {
		return // not one of ours
	}
	p.tiers[i].Put(bp)
}

// encodeSessionField encodes the "session" field (number 1) of an
// AppendRequest.
func encodeSessionField(session uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), session)
}

// encodedAppendRequest is an AppendRequest whose fields are already encoded;
// appendCodec sends it without marshaling or copying again.
type encodedAppendRequest struct {
	fields mem.BufferSlice
}

// appendCodec is the codec of the host's Append calls: it sends an
// encodedAppendRequest as is and leaves everything else to gRPC's proto
// codec. Its name is "proto", so the driver decodes with the standard codec.
type appendCodec struct{ proto encoding.CodecV2 }

func (c appendCodec) Name() string { return "proto" }

func (c appendCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encodedAppendRequest); ok {
		return e.fields, nil
	}
	return c.proto.Marshal(v)
}

func (c appendCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.proto.Unmarshal(data, v)
}

var appendCallCodec = grpc.ForceCodecV2(appendCodec{proto: encoding.GetCodecV2("proto")})

// appendPipe is the pipelined append path of one session: one Append call
// to the driver, a sender goroutine that packs queued batches into messages,
// and a receiver goroutine that matches acks to appends in order. The
// receiver is the only goroutine that completes futures once they are
// queued, so they complete in call order, and after a break every queued and
// in-flight append fails with the same error.
type appendPipe struct {
	h      *hostStream
	ctx    context.Context
	cancel context.CancelFunc
	// sessionField is the encoded session field every message starts with.
	sessionField []byte

	mu       sync.Mutex
	queue    []*pendingAppend // admitted, not yet sent
	inflight []*pendingAppend // sent, not yet acknowledged
	bytes    int              // Size of queue and inflight
	err      error            // set once the pipe is broken or closed
	closing  bool             // Close: end the call once everything is acked
	sending  bool             // a goroutine is in call.SendMsg
	call     grpc.BidiStreamingClient[streamv1.AppendRequest, streamv1.AppendResponse]
	space    chan struct{} // closed (and replaced) when room frees up

	wake     chan struct{} // nudges the sender
	done     chan struct{} // closed when every queued append has completed
	finished sync.Once
	lastNext int64 // receiver only: end of the last acked batch
}

func newAppendPipe(h *hostStream) *appendPipe {
	p := &appendPipe{
		h:        h,
		space:    make(chan struct{}),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		lastNext: h.next.Load(),

		sessionField: encodeSessionField(h.session),
	}
	p.ctx, p.cancel = context.WithCancel(h.c.ctx)
	go p.send()
	return p
}

func (p *appendPipe) what() string { return fmt.Sprintf("append to stream %q", p.h.name) }

// enqueue admits one append, waiting on ctx while the pipeline is full.
func (p *appendPipe) enqueue(ctx context.Context, pb *streamv1.Batch, size int) *stream.AppendFuture {
	if n := proto.Size(pb); n > maxMessageBytes-16 {
		return stream.FailedAppend(fmt.Errorf("%w: %s: batch of %d bytes exceeds the plugin transport's %d", stream.ErrBatchTooLarge, p.what(), size, maxMessageBytes))
	}
	field, wire, err := encodeBatchBuffer(pb)
	if err != nil {
		return stream.FailedAppend(fmt.Errorf("%w: %s: encode batch: %v", stream.ErrInvalidArgument, p.what(), err))
	}
	pa := &pendingAppend{field: field, wire: wire, size: size, count: pb.GetCount()}
	p.mu.Lock()
	for {
		if p.err != nil {
			err := p.err
			p.mu.Unlock()
			<-p.done // earlier appends complete first
			return stream.FailedAppend(err)
		}
		if p.closing {
			p.mu.Unlock()
			return stream.FailedAppend(fmt.Errorf("%w: %s", stream.ErrClosed, p.what()))
		}
		n := len(p.queue) + len(p.inflight)
		if n == 0 || (p.bytes+size <= maxPipeBytes && n < maxPipeAppends) {
			break
		}
		space := p.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return stream.FailedAppend(ctx.Err())
		}
		p.mu.Lock()
	}
	f, complete := stream.NewAppendFuture()
	pa.complete = complete
	p.queue = append(p.queue, pa)
	p.bytes += size
	p.sendInlineLocked()
	return f
}

// send opens the Append call and sends queued batches, several per message
// when they are waiting together.
func (p *appendPipe) send() {
	call, err := p.h.c.bulk.Append(p.ctx, appendCallCodec)
	if err != nil {
		p.finish(p.h.c.callErr(context.Background(), p.what(), err))
		return
	}
	p.mu.Lock()
	p.call = call
	p.mu.Unlock()
	go p.receive()
	for {
		p.mu.Lock()
		for len(p.queue) == 0 || p.sending {
			if p.err != nil {
				p.mu.Unlock()
				return
			}
			if p.closing && len(p.queue) == 0 && !p.sending {
				p.mu.Unlock()
				_ = call.CloseSend()
				return
			}
			p.mu.Unlock()
			select {
			case <-p.wake:
			case <-p.ctx.Done():
				return
			}
			p.mu.Lock()
		}
		if p.err != nil {
			p.mu.Unlock()
			return
		}
		req := p.takeLocked()
		p.mu.Unlock()
		if !p.sendMsg(req) {
			return // the receiver reports why the call ended
		}
	}
}

// inlineSendBytes is the largest batch an appending goroutine sends itself
// when the pipe is idle, saving the switch to the sender goroutine; gRPC
// takes a message this small without waiting for the socket.
const inlineSendBytes = 32 << 10

// sendInlineLocked sends the one queued batch from the appending goroutine
// when the pipe is idle (nothing queued before it, in flight or being sent),
// else wakes the sender goroutine. mu is held; it returns with mu released.
func (p *appendPipe) sendInlineLocked() {
	if p.call == nil || p.sending || p.closing || p.err != nil || len(p.queue) != 1 || len(p.inflight) > 0 || p.queue[0].wire > inlineSendBytes {
		p.mu.Unlock()
		p.nudge()
		return
	}
	req := p.takeLocked()
	p.mu.Unlock()
	p.sendMsg(req)
	p.mu.Lock()
	more := len(p.queue) > 0 || p.closing
	p.mu.Unlock()
	if more {
		p.nudge()
	}
}

// nudge wakes the sender goroutine.
func (p *appendPipe) nudge() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// takeLocked moves the next group of queued batches (up to coalesceBytes
// or maxBatchesPerMessage) to inflight and marks the pipe as sending. mu is
// held.
func (p *appendPipe) takeLocked() *encodedAppendRequest {
	n, size := 0, 0
	for n < len(p.queue) && n < maxBatchesPerMessage && (n == 0 || size+p.queue[n].wire <= coalesceBytes) {
		size += p.queue[n].wire
		n++
	}
	fields := make(mem.BufferSlice, 0, n+1)
	fields = append(fields, mem.SliceBuffer(p.sessionField))
	for _, pa := range p.queue[:n] {
		// gRPC frees (and recycles) the buffer once written.
		fields = append(fields, pa.field)
		pa.field = nil
	}
	p.inflight = append(p.inflight, p.queue[:n]...)
	rest := copy(p.queue, p.queue[n:])
	clear(p.queue[rest:])
	p.queue = p.queue[:rest]
	p.sending = true
	return &encodedAppendRequest{fields: fields}
}

// sendMsg sends one message taken by takeLocked and clears the sending
// mark. It reports whether the send succeeded.
func (p *appendPipe) sendMsg(req *encodedAppendRequest) bool {
	err := p.call.SendMsg(req)
	p.mu.Lock()
	p.sending = false
	p.mu.Unlock()
	return err == nil
}

// receive matches acks to in-flight appends, in order.
func (p *appendPipe) receive() {
	for {
		resp, err := p.call.Recv()
		if err != nil {
			p.finish(p.recvErr(err))
			return
		}
		if err := p.ack(resp.GetAcks()); err != nil {
			p.cancel()
			p.finish(err)
			return
		}
	}
}

// recvErr is the error that ended the Append call.
func (p *appendPipe) recvErr(err error) error {
	if err == io.EOF {
		p.mu.Lock()
		n, closing := len(p.queue)+len(p.inflight), p.closing
		p.mu.Unlock()
		if n == 0 && closing {
			return fmt.Errorf("%w: %s", stream.ErrClosed, p.what())
		}
		return fmt.Errorf("%w: %s: %s ended the append call with %d appends unanswered", stream.ErrUnavailable, p.what(), p.h.c.describe(), n)
	}
	if p.h.c.isClosed() {
		return fmt.Errorf("%w: %s: %s was closed with appends in flight", stream.ErrUnavailable, p.what(), p.h.c.describe())
	}
	return p.h.c.callErr(context.Background(), p.what(), err)
}

// ack completes the appends one response answers. An answer the contract
// does not allow (more acks than appends, offsets that do not match the
// batch's count or go backwards) is ErrCorrupt and breaks the pipe.
func (p *appendPipe) ack(acks []*streamv1.Ack) error {
	p.mu.Lock()
	if len(acks) > len(p.inflight) {
		n := len(p.inflight)
		p.mu.Unlock()
		return fmt.Errorf("%w: %s: %s sent %d acks for %d appends in flight", stream.ErrCorrupt, p.what(), p.h.c.describe(), len(acks), n)
	}
	done := p.inflight[:len(acks):len(acks)]
	p.inflight = p.inflight[len(acks):]
	for _, pa := range done {
		p.bytes -= pa.size
	}
	close(p.space)
	p.space = make(chan struct{})
	p.mu.Unlock()
	for i, a := range acks {
		pa := done[i]
		if a.GetError() != nil {
			pa.complete(stream.AppendResult{}, errorFromProto(a.GetError()))
			continue
		}
		base, next := a.GetBaseOffset(), a.GetNextOffset()
		if base < p.lastNext || next-base != int64(pa.count) {
			err := fmt.Errorf("%w: %s: %s acked a batch of count %d as [%d, %d) after an ack ending at %d",
				stream.ErrCorrupt, p.what(), p.h.c.describe(), pa.count, base, next, p.lastNext)
			for _, rest := range done[i:] {
				rest.complete(stream.AppendResult{}, err)
			}
			return err
		}
		p.lastNext = next
		raise(&p.h.next, next)
		pa.complete(stream.AppendResult{BaseOffset: base, NextOffset: next}, nil)
	}
	return nil
}

// finish breaks the pipe with err: every queued and in-flight append fails
// with it, in order, and so does every later one.
func (p *appendPipe) finish(err error) {
	p.finished.Do(func() {
		p.mu.Lock()
		p.err = err
		failed := append(p.inflight, p.queue...)
		p.inflight, p.queue, p.bytes = nil, nil, 0
		close(p.space)
		p.space = make(chan struct{})
		p.mu.Unlock()
		for _, pa := range failed {
			pa.complete(stream.AppendResult{}, err)
		}
		p.cancel()
		close(p.done)
	})
}

// close lets the queued appends finish, ends the Append call and waits until
// every append has completed.
func (p *appendPipe) close() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.nudge()
	<-p.done
}
