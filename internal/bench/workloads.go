package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// kafkaRecordBytes is the record size of the sharedlog workload's Kafka
// batches (1 KiB records: 16 bytes of key and framing, 1008 of value).
const kafkaRecordBytes = 1024

// prepare builds c's workload on t.
func prepare(ctx context.Context, c Config, t Target) (*workload, error) {
	switch c.Workload {
	case WorkloadAppend, WorkloadFetchTail, WorkloadFetchCatchup:
		if t.Store == nil {
			return nil, fmt.Errorf("workload %s needs a stream store", c.Workload)
		}
		return prepareStreams(ctx, c, t.Store)
	case WorkloadSharedLog:
		if t.Store == nil {
			return nil, fmt.Errorf("workload %s needs a stream store", c.Workload)
		}
		return prepareSharedLog(ctx, c, t.Store)
	case WorkloadRaw:
		if t.Storage == nil {
			return nil, fmt.Errorf("workload raw needs the driver's chunked.Storage (an in-process chunked driver)")
		}
		return prepareRaw(c, t)
	case WorkloadProduceConsume:
		return prepareKafka(ctx, c)
	}
	return nil, fmt.Errorf("unknown workload %q", c.Workload)
}

// runID names a run's streams, partitions, keys and topics uniquely.
func runID() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// randomPayload returns n random bytes.
func randomPayload(n int) []byte {
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return p
}

// pipeline calls submit until stop is closed or an operation failed,
// keeping at most depth operations outstanding; each submit returns the
// wait of its operation, and waits run in submission order on another
// goroutine. It returns the first error of a wait.
func pipeline(stop <-chan struct{}, depth int, submit func(n int) (wait func() error)) error {
	sem := make(chan struct{}, depth)
	q := make(chan func() error, depth)
	var failed atomic.Bool
	errc := make(chan error, 1)
	go func() {
		var first error
		for wait := range q {
			if err := wait(); err != nil && first == nil {
				first = err
				failed.Store(true)
			}
			<-sem
		}
		errc <- first
	}()
	for n := 0; ; n++ {
		select {
		case <-stop:
		case sem <- struct{}{}:
			if !failed.Load() {
				q <- submit(n)
				continue
			}
		}
		break
	}
	close(q)
	return <-errc
}

// appender returns the submit function of a pipelined appender to st that
// records into series i of m. payload(n) gives append n's payload. With
// retain > 0, once st holds more than retain bytes of appends, it is
// trimmed (from the waiting goroutine) to keep about half of that.
func appender(ctx context.Context, m *meter, i int, st *stream.Stream, retain int64, payload func(n int) []byte) func(n int) func() error {
	var held int64 // bytes acked above the last trim point, from the waits' goroutine only
	return func(n int) func() error {
		p := payload(n)
		start := time.Now()
		f := st.Append(ctx, stream.Batch{Count: 1, Timestamp: start.UnixMilli(), Payload: p})
		return func() error {
			r, err := f.Wait(ctx)
			if err != nil {
				return fmt.Errorf("append to %s: %w", st.Name(), err)
			}
			m.record(i, int64(len(p)), 1, time.Since(start))
			if held += int64(len(p)); retain > 0 && held > retain {
				keep := max(1, retain/2/int64(len(p)))
				if to := r.BaseOffset + 1 - keep; to > st.StartOffset() {
					if err := st.Trim(ctx, to); err != nil {
						return fmt.Errorf("trim %s to %d: %w", st.Name(), to, err)
					}
				}
				held = keep * int64(len(p))
			}
			return nil
		}
	}
}

// stampedPayloads returns payload(n) for a pipeline depth deep: depth+1
// reusable buffers in a ring (a buffer is reused only after its append
// completed), each stamped with the time it is handed out.
func stampedPayloads(size, depth int) func(n int) []byte {
	ring := make([][]byte, depth+1)
	for i := range ring {
		ring[i] = randomPayload(size)
	}
	return func(n int) []byte {
		p := ring[n%len(ring)]
		binary.LittleEndian.PutUint64(p, uint64(time.Now().UnixNano()))
		return p
	}
}

// group runs fs concurrently and returns the first error.
func group(fs ...func() error) error {
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepareStreams opens c.Streams fresh streams for append, fetch-tail and
// fetch-catchup (prefilled for the latter).
func prepareStreams(ctx context.Context, c Config, store *stream.Store) (*workload, error) {
	id := runID()
	streams := make([]*stream.Stream, 0, c.Streams)
	w := &workload{cleanup: func(ctx context.Context) {
		for _, s := range streams {
			_ = s.Close()
			_ = store.Delete(ctx, s.Name())
		}
	}}
	for i := range c.Streams {
		s, err := store.Open(ctx, fmt.Sprintf("bench/%s/%d", id, i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		if err != nil {
			w.cleanup(ctx)
			return nil, err
		}
		streams = append(streams, s)
	}
	fixed := randomPayload(c.BatchBytes)
	constant := func(int) []byte { return fixed }
	each := func(f func(i int, s *stream.Stream) error) error {
		fs := make([]func() error, len(streams))
		for i, s := range streams {
			fs[i] = func() error { return f(i, s) }
		}
		return group(fs...)
	}
	switch c.Workload {
	case WorkloadAppend:
		w.series = []string{"append"}
		w.run = func(ctx context.Context, m *meter, stop <-chan struct{}) error {
			return each(func(_ int, s *stream.Stream) error {
				return pipeline(stop, c.Inflight, appender(ctx, m, 0, s, c.RetainBytes, constant))
			})
		}
	case WorkloadFetchTail:
		w.series = []string{"append", "read"}
		w.run = func(ctx context.Context, m *meter, stop <-chan struct{}) error {
			return each(func(_ int, s *stream.Stream) error {
				return group(
					func() error {
						return pipeline(stop, c.Inflight, appender(ctx, m, 0, s, c.RetainBytes, stampedPayloads(c.BatchBytes, c.Inflight)))
					},
					func() error { return tailReader(ctx, m, 1, s, c.FetchBytes, stop) },
				)
			})
		}
	case WorkloadFetchCatchup:
		if err := each(func(_ int, s *stream.Stream) error { return prefill(ctx, s, fixed, c.Inflight, c.PrefillBytes) }); err != nil {
			w.cleanup(ctx)
			return nil, fmt.Errorf("prefill: %w", err)
		}
		w.series = []string{"read"}
		if c.CatchupAppends {
			w.series = append(w.series, "append")
		}
		w.run = func(ctx context.Context, m *meter, stop <-chan struct{}) error {
			return each(func(_ int, s *stream.Stream) error {
				fs := []func() error{func() error { return catchupReader(ctx, m, 0, s, c.FetchBytes, stop) }}
				if c.CatchupAppends {
					fs = append(fs, func() error { return pipeline(stop, c.Inflight, appender(ctx, m, 1, s, 0, constant)) })
				}
				return group(fs...)
			})
		}
	}
	return w, nil
}

// prefill appends payload to s until it holds bytes bytes.
func prefill(ctx context.Context, s *stream.Stream, payload []byte, depth int, bytes int64) error {
	n := int((bytes + int64(len(payload)) - 1) / int64(len(payload)))
	stop := make(chan struct{})
	var once sync.Once
	return pipeline(stop, depth, func(i int) func() error {
		if i == n-1 {
			once.Do(func() { close(stop) })
		}
		f := s.Append(ctx, stream.Batch{Count: 1, Payload: payload})
		return func() error { _, err := f.Wait(ctx); return err }
	})
}

// tailReader follows s from its current end, recording each batch's
// end-to-end latency (from the send time stamped in its payload) into
// series i, until stop is closed.
func tailReader(ctx context.Context, m *meter, i int, s *stream.Stream, maxBytes int, stop <-chan struct{}) error {
	next := s.NextOffset()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		bs, err := s.Fetch(ctx, next, stream.NoEnd, maxBytes)
		if errors.Is(err, stream.ErrOffsetOutOfRange) && next < s.StartOffset() {
			next = s.StartOffset() // trimmed past the reader (RetainBytes)
			continue
		}
		if err != nil {
			return fmt.Errorf("fetch %s at %d: %w", s.Name(), next, err)
		}
		if len(bs) == 0 {
			time.Sleep(200 * time.Microsecond)
			continue
		}
		now := time.Now().UnixNano()
		for _, b := range bs {
			sent := int64(binary.LittleEndian.Uint64(b.Payload))
			m.record(i, int64(len(b.Payload)), int64(b.Count), time.Duration(now-sent))
			next = b.EndOffset()
		}
	}
}

// catchupReader reads s from its start offset to its end, again and
// again, recording each fetch (its bytes and latency) into series i,
// until stop is closed.
func catchupReader(ctx context.Context, m *meter, i int, s *stream.Stream, maxBytes int, stop <-chan struct{}) error {
	start := s.StartOffset()
	next := start
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		t0 := time.Now()
		bs, err := s.Fetch(ctx, next, stream.NoEnd, maxBytes)
		if err != nil {
			return fmt.Errorf("fetch %s at %d: %w", s.Name(), next, err)
		}
		if len(bs) == 0 {
			next = start
			continue
		}
		var bytes, recs int64
		for _, b := range bs {
			bytes += int64(len(b.Payload))
			recs += int64(b.Count)
			next = b.EndOffset()
		}
		m.record(i, bytes, recs, time.Since(t0))
	}
}

// prepareSharedLog opens c.Streams fresh SharedLog partitions; each
// append is a fresh copy of one Kafka record batch of 1 KiB records
// (BatchBytes/1 KiB of them, at least one).
func prepareSharedLog(ctx context.Context, c Config, store *stream.Store) (*workload, error) {
	id := runID()
	var logs []*sharedlog.Log
	w := &workload{series: []string{"append"}, cleanup: func(ctx context.Context) {
		for _, l := range logs {
			name := l.Name()
			_ = l.Close()
			_ = sharedlog.Delete(ctx, store, name)
		}
	}}
	for i := range c.Streams {
		l, err := sharedlog.Open(ctx, store, fmt.Sprintf("bench-%s-%d", id, i), sharedlog.Options{Epoch: 1})
		if err != nil {
			w.cleanup(ctx)
			return nil, err
		}
		logs = append(logs, l)
	}
	records := max(1, c.BatchBytes/kafkaRecordBytes)
	tmpl := sharedlogtest.Build(sharedlogtest.BatchSpec{Records: records, ValueSize: kafkaRecordBytes - 16, Timestamp: time.Now().UnixMilli(), Tag: "bench"})
	w.run = func(ctx context.Context, m *meter, stop <-chan struct{}) error {
		fs := make([]func() error, len(logs))
		for i, l := range logs {
			fs[i] = func() error {
				return pipeline(stop, c.Inflight, func(int) func() error {
					b := sharedlogtest.Clone(tmpl)
					start := time.Now()
					f := l.AppendAsync(ctx, b, sharedlog.AppendOptions{})
					return func() error {
						if _, err := f.Wait(ctx); err != nil {
							return fmt.Errorf("sharedlog append to %s: %w", l.Name(), err)
						}
						m.record(0, int64(len(tmpl)), int64(records), time.Since(start))
						return nil
					}
				})
			}
		}
		return group(fs...)
	}
	return w, nil
}

// prepareRaw is the backend's own loop: Streams*Inflight writers, each
// putting fresh keys of BatchBytes bytes with put-if-absent, one at a
// time; the least a durable write of that payload costs on the backend.
// The keys are deleted at cleanup.
func prepareRaw(c Config, t Target) (*workload, error) {
	st := t.Storage
	id := runID()
	writers := c.Streams * c.Inflight
	counts := make([]int, writers)
	key := func(w, n int) string { return fmt.Sprintf("bench-raw/%s/%d/%012d", id, w, n) }
	payload := randomPayload(c.BatchBytes)
	w := &workload{series: []string{"put"}}
	w.cleanup = func(ctx context.Context) {
		var keys []string
		for wr, n := range counts {
			for i := range n {
				keys = append(keys, key(wr, i))
				if len(keys) == 1000 {
					_ = st.Delete(ctx, keys)
					keys = keys[:0]
				}
			}
		}
		if len(keys) > 0 {
			_ = st.Delete(ctx, keys)
		}
	}
	w.run = func(ctx context.Context, m *meter, stop <-chan struct{}) error {
		fs := make([]func() error, writers)
		for wr := range fs {
			fs[wr] = func() error {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return nil
					default:
					}
					start := time.Now()
					k := key(wr, n)
					counts[wr] = n + 1
					if err := st.PutIfAbsent(ctx, k, payload); err != nil {
						return fmt.Errorf("put-if-absent %s: %w", k, err)
					}
					m.record(0, int64(len(payload)), 1, time.Since(start))
				}
			}
		}
		return group(fs...)
	}
	return w, nil
}
