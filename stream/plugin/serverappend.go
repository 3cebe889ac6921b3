package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// ackQueueLen bounds the appends a driver has accepted from one Append call
// but not yet acknowledged; beyond it the driver stops reading and gRPC flow
// control holds the host back.
const ackQueueLen = 4096

// maxAcksPerMessage bounds the acks coalesced into one AppendResponse.
const maxAcksPerMessage = 1024

type appendCall = grpc.BidiStreamingServer[streamv1.AppendRequest, streamv1.AppendResponse]

// ackQueue holds the futures of one Append call in call order and sends
// their acks. Whoever finds completed futures at its head sends them: the
// receiving goroutine right after handing a message's batches to the driver
// (a driver that completes appends at once, like memory, is answered without
// a goroutine switch), or the waiter goroutine for futures that complete
// later. Popping and sending happen under one lock, so acks go out in order.
type ackQueue struct {
	call appendCall

	sendMu sync.Mutex // held while popping and sending
	mu     sync.Mutex // guards q
	q      []*stream.AppendFuture
	err    error // first send error (under sendMu)

	kick chan struct{} // wakes the waiter
	room chan struct{} // signalled when the queue shrank
}

func (a *ackQueue) push(f *stream.AppendFuture) {
	a.mu.Lock()
	a.q = append(a.q, f)
	a.mu.Unlock()
}

func (a *ackQueue) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.q)
}

func (a *ackQueue) head() *stream.AppendFuture {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.q) == 0 {
		return nil
	}
	return a.q[0]
}

// flush sends the acks of the completed futures at the head of the queue.
func (a *ackQueue) flush() error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	for a.err == nil {
		a.mu.Lock()
		n := 0
		for n < len(a.q) && n < maxAcksPerMessage && a.q[n].Completed() {
			n++
		}
		done := append([]*stream.AppendFuture(nil), a.q[:n]...)
		rest := copy(a.q, a.q[n:])
		clear(a.q[rest:])
		a.q = a.q[:rest]
		a.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case a.room <- struct{}{}:
		default:
		}
		resp := &streamv1.AppendResponse{Acks: make([]*streamv1.Ack, n)}
		for i, f := range done {
			resp.Acks[i] = ackOf(f)
		}
		a.err = a.call.Send(resp)
	}
	return a.err
}

// wait is the waiter goroutine: it sends acks for futures that complete
// after the receiving goroutine looked.
func (a *ackQueue) wait(ctx context.Context) {
	for {
		select {
		case <-a.kick:
		case <-ctx.Done():
			return
		}
		for f := a.head(); f != nil; f = a.head() {
			select {
			case <-f.Done():
			case <-ctx.Done():
				return
			}
			if a.flush() != nil {
				return
			}
		}
	}
}

func (s *server) Append(call appendCall) error {
	req, err := call.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	sess, err := s.session(req.GetSession())
	if err != nil {
		return toStatus(err)
	}
	ctx := call.Context()
	where := fmt.Sprintf("append to stream %q", sess.Name())
	a := &ackQueue{call: call, kick: make(chan struct{}, 1), room: make(chan struct{}, 1)}
	wctx, stopWaiter := context.WithCancel(ctx)
	waiterDone := make(chan struct{})
	go func() {
		defer close(waiterDone)
		a.wait(wctx)
	}()
	defer func() {
		stopWaiter()
		<-waiterDone
	}()
	for {
		for _, pb := range req.GetBatches() {
			b, err := batchFromProto(pb, where)
			if err != nil {
				a.push(stream.FailedAppend(err))
			} else {
				// Verified just now: the driver need not read the
				// payload again to checksum it.
				b.PayloadChecksum, b.PayloadChecksumSet = pb.GetCrc32C(), true
				a.push(sess.Append(ctx, b))
			}
		}
		if err := a.flush(); err != nil {
			return err
		}
		if a.head() != nil {
			select {
			case a.kick <- struct{}{}:
			default:
			}
		}
		for a.len() >= ackQueueLen {
			select {
			case <-a.room:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		req, err = call.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	// The host is done sending: answer what is left, in order.
	for f := a.head(); f != nil; f = a.head() {
		select {
		case <-f.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := a.flush(); err != nil {
			return err
		}
	}
	return nil
}

func ackOf(f *stream.AppendFuture) *streamv1.Ack {
	res, err := f.Result()
	if err != nil {
		return &streamv1.Ack{Error: errorToProto(err)}
	}
	return &streamv1.Ack{BaseOffset: res.BaseOffset, NextOffset: res.NextOffset}
}
