package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratastream/strata/stream"
)

// appendCluster makes payload durable in a cluster stream (catalog, group
// offsets) held open in *s, which the caller's mutex guards. When the
// session failed because its driver process died (ErrUnavailable,
// ErrClosed), the stream is reopened at the broker epoch on the store (a
// restarted driver), the records the broker had not read are replayed
// with apply (appends whose outcome it never learned), and payload is
// appended again unless it is the last of them. If the driver is still
// down the first error is returned and a later call tries again.
func (b *Broker) appendCluster(ctx context.Context, s **stream.Stream, payload []byte, apply func([]byte) error) (stream.AppendResult, error) {
	batch := stream.Batch{Count: 1, Timestamp: time.Now().UnixMilli(), Payload: payload}
	read := (*s).NextOffset() // the caller's mutex serializes appends: all before it were read
	res, err := stream.Append(ctx, *s, batch)
	if err == nil || !(errors.Is(err, stream.ErrUnavailable) || errors.Is(err, stream.ErrClosed)) {
		return res, err
	}
	old := *s
	ns, landed, rerr := b.reopenCluster(ctx, old, read, payload, apply)
	if rerr != nil {
		b.log.Warn("reopening a cluster stream failed; the next write tries again", "stream", old.Name(), "err", rerr)
		return res, err
	}
	*s = ns
	_ = old.Close()
	if landed != nil {
		return *landed, nil
	}
	b.log.Info("cluster stream reopened", "stream", ns.Name(), "next_offset", ns.NextOffset())
	return stream.Append(ctx, ns, batch)
}

// reopenCluster opens old's stream again at the broker epoch and replays
// with apply the records from offset read on. If the last of them is
// payload, its offsets are returned as landed and it is not applied.
func (b *Broker) reopenCluster(ctx context.Context, old *stream.Stream, read int64, payload []byte, apply func([]byte) error) (*stream.Stream, *stream.AppendResult, error) {
	ns, err := b.cfg.Store.Open(ctx, old.Name(), stream.OpenOptions{Epoch: uint64(b.epoch)})
	if err != nil {
		b.checkFenced(err, "reopening "+old.Name())
		return nil, nil, fmt.Errorf("broker: reopening %s on %s: %w", old.Name(), b.cfg.Driver, err)
	}
	var unread []stream.Batch
	err = readStreamFrom(ctx, ns, max(read, ns.StartOffset()), func(bt stream.Batch) error {
		unread = append(unread, bt)
		return nil
	})
	var landed *stream.AppendResult
	if n := len(unread); err == nil && n > 0 && bytes.Equal(unread[n-1].Payload, payload) {
		landed = &stream.AppendResult{BaseOffset: unread[n-1].BaseOffset, NextOffset: unread[n-1].EndOffset()}
		unread = unread[:n-1]
	}
	for _, bt := range unread {
		if err != nil {
			break
		}
		err = apply(bt.Payload)
	}
	if err != nil {
		_ = ns.Close()
		return nil, nil, fmt.Errorf("broker: replaying %s after reopening it: %w", old.Name(), err)
	}
	return ns, landed, nil
}
