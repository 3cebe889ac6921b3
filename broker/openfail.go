package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/stream"
)

// openFailure is a partition that failed to open: the gen its open left
// it at, and why.
type openFailure struct {
	p   *partition
	gen uint64
	err error
}

// unavailable reports whether err says the backend (or the driver
// process) could not be reached, rather than something of the stream's
// own (corrupt data, a bad object).
func unavailable(err error) bool {
	return errors.Is(err, stream.ErrUnavailable) || errors.Is(err, stream.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// takeoverErr is the error a takeover fails with when some of parts
// failed to open, or nil when the broker serves the others: a fence (a
// newer broker took over), the start being cancelled, or a store every
// partition of which failed for want of its backend (the backend or the
// driver is down, not one partition's data). Any other failure is the
// partition's own: corrupt or foreign data, an object the driver refuses.
func takeoverErr(ctx context.Context, parts []*partition, failed []openFailure) error {
	if len(failed) == 0 {
		return nil
	}
	for _, f := range failed {
		if isFence(f.err) {
			return f.err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("broker: opening %d partitions: %w (first failure: %w)", len(parts), err, failed[0].err)
	}
	total := map[*stream.Store]int{}
	for _, p := range parts {
		total[p.topic.store]++
	}
	down := map[*stream.Store]int{}
	for _, f := range failed {
		if unavailable(f.err) {
			down[f.p.topic.store]++
		}
	}
	for _, f := range failed {
		if st := f.p.topic.store; unavailable(f.err) && down[st] == total[st] {
			return fmt.Errorf("broker: no partition on %s could be opened (%d of %d unavailable: is the backend or its driver down?): %w",
				f.p.topic.driver, down[st], total[st], f.err)
		}
	}
	return nil
}

// keepFailed keeps each partition that failed to open failed: calls on it
// get KAFKA_STORAGE_ERROR while it is reopened in the background, and the
// failure is logged now (naming the topic, the partition and, in the
// error, the object) and then at most every reopenLogEvery. A fenced
// partition is left closed (a fenced broker stops serving; in a cluster
// the next assignment reopens it). It returns the first failure's error
// (nil when none failed).
func (b *Broker) keepFailed(failed []openFailure) error {
	for _, f := range failed {
		p := f.p
		if isFence(f.err) || b.closed.Load() {
			b.log.Error("opening partition failed", "topic", p.topic.name, "partition", p.index, "err", f.err)
			continue
		}
		p.mu.Lock()
		if p.gen != f.gen { // closed or opened anew meanwhile
			p.mu.Unlock()
			continue
		}
		p.reopening = true
		p.mu.Unlock()
		b.log.Error("partition failed to open; serving the others, answering KAFKA_STORAGE_ERROR for it and retrying",
			"topic", p.topic.name, "partition", p.index, "stream", p.name, "driver", p.topic.driver, "err", f.err)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			p.reopen(nil, f.gen, time.Now())
		}()
	}
	if len(failed) > 0 {
		return failed[0].err
	}
	return nil
}

// failedPartitions names the partitions that failed to open and are being
// retried (TOPIC-PARTITION), in topic order.
func (b *Broker) failedPartitions() []string {
	if b.catalog == nil {
		return nil
	}
	var out []string
	for _, t := range b.catalog.list() {
		b.catalog.mu.RLock()
		parts := append([]*partition(nil), t.parts...)
		b.catalog.mu.RUnlock()
		for _, p := range parts {
			if _, code := p.current(); code == kerr.KafkaStorageError.Code {
				out = append(out, p.String())
			}
		}
	}
	return out
}

// failedSummary says which partitions failed to open ("" when none): at
// most maxNamed of them by name.
func failedSummary(failed []string) string {
	const maxNamed = 20
	if len(failed) == 0 {
		return ""
	}
	names := strings.Join(failed[:min(len(failed), maxNamed)], ", ")
	if len(failed) > maxNamed {
		names += fmt.Sprintf(" and %d more", len(failed)-maxNamed)
	}
	noun := "partitions"
	if len(failed) == 1 {
		noun = "partition"
	}
	return fmt.Sprintf("%d %s failed to open (KAFKA_STORAGE_ERROR, retried; see the log): %s", len(failed), noun, names)
}
