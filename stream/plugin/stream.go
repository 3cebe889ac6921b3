package plugin

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// hostStream is the host side of one stream session in a driver process.
type hostStream struct {
	c       *Client
	session uint64
	name    string
	epoch   uint64
	mode    stream.Mode
	// maxFetch is the store's Info.MaxFetchBytes, the size bound of a
	// Fetch with maxBytes <= 0.
	maxFetch int

	// start and next cache the offsets of the latest answer.
	start, next atomic.Int64

	mu     sync.Mutex
	closed bool
	pipe   *appendPipe // started by the first Append
}

var _ stream.DriverStream = (*hostStream)(nil)

func (h *hostStream) Name() string       { return h.name }
func (h *hostStream) Epoch() uint64      { return h.epoch }
func (h *hostStream) StartOffset() int64 { return h.start.Load() }
func (h *hostStream) NextOffset() int64  { return h.next.Load() }

// raise moves a cached offset forward (never back).
func raise(v *atomic.Int64, to int64) {
	for {
		cur := v.Load()
		if to <= cur || v.CompareAndSwap(cur, to) {
			return
		}
	}
}

// observe records the offsets the driver reported. A read-only session
// takes them as they are ("as of the last Fetch"); a read-write session only
// moves forward.
func (h *hostStream) observe(start, next int64) {
	if h.mode == stream.ModeReadOnly {
		h.start.Store(start)
		h.next.Store(next)
		return
	}
	raise(&h.start, start)
	raise(&h.next, next)
}

// check fails once the driver process is gone. The front door
// (stream.Stream) has checked ctx and the closed state.
func (h *hostStream) check(what string) error {
	return h.c.check(what)
}

// Append sends b on the session's Append call and returns at once. The
// payload is checksummed here (CRC32C), unless the caller supplied its
// checksum with b, and verified by the driver. ctx
// governs only admission: a done ctx fails the future with ctx.Err() before
// the batch is queued.
func (h *hostStream) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	pb := batchToProto(&b, payloadChecksum(&b))
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return stream.FailedAppend(fmt.Errorf("%w: append to stream %q", stream.ErrClosed, h.name))
	}
	if h.pipe == nil {
		if err := h.c.check(fmt.Sprintf("append to stream %q", h.name)); err != nil {
			h.mu.Unlock()
			return stream.FailedAppend(err)
		}
		h.pipe = newAppendPipe(h)
	}
	p := h.pipe
	h.mu.Unlock()
	return p.enqueue(ctx, pb, b.Size())
}

// Fetch asks the driver for [start, end) and assembles the chunks it sends,
// checking each batch's CRC32C and the chunks' offsets (see
// fetchAssembler).
func (h *hostStream) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	what := fmt.Sprintf("fetch stream %q at %d", h.name, start)
	if err := h.check(what); err != nil {
		return nil, err
	}
	limit := maxBytes
	if limit <= 0 {
		limit = h.maxFetch
	}
	if limit <= 0 {
		limit = math.MaxInt
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	call, err := h.c.bulk.Fetch(ctx, &streamv1.FetchRequest{Session: h.session, Start: start, End: end, MaxBytes: int64(maxBytes)})
	if err != nil {
		return nil, h.c.callErr(ctx, what, err)
	}
	a := newFetchAssembler(h.name, start, end, limit)
	for {
		resp, err := call.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, h.c.callErr(ctx, what, err)
		}
		if err := a.add(resp); err != nil {
			return nil, err
		}
	}
	batches, err := a.finish()
	if err != nil {
		return nil, err
	}
	h.observe(a.startOff, a.nextOff)
	return batches, nil
}

func (h *hostStream) Trim(ctx context.Context, newStart int64) error {
	what := fmt.Sprintf("trim stream %q to %d", h.name, newStart)
	if err := h.check(what); err != nil {
		return err
	}
	resp, err := h.c.rpc.Trim(ctx, &streamv1.TrimRequest{Session: h.session, NewStart: newStart})
	if err != nil {
		return h.c.callErr(ctx, what, err)
	}
	h.observe(resp.GetStartOffset(), resp.GetNextOffset())
	return nil
}

// Close waits for the session's in-flight appends, ends its Append call and
// closes the session in the driver. Later calls fail with ErrClosed.
func (h *hostStream) Close() error {
	what := fmt.Sprintf("close stream %q", h.name)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return fmt.Errorf("%w: %s", stream.ErrClosed, what)
	}
	h.closed = true
	p := h.pipe
	h.mu.Unlock()
	if p != nil {
		p.close()
	}
	if err := h.c.check(what); err != nil {
		return err
	}
	_, err := h.c.rpc.CloseStream(h.c.ctx, &streamv1.CloseStreamRequest{Session: h.session})
	return h.c.callErr(h.c.ctx, what, err)
}
