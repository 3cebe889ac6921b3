package conformance

import (
	"fmt"
	"sync"

	"github.com/stratastream/strata/stream"
)

var _ = register(FamilyAppend,
	Case{Name: "pipelined-in-order", Doc: "hundreds of appends in flight from one goroutine: contiguous offsets in call order, acks in call order", run: casePipelinedInOrder},
	Case{Name: "pipelined-goroutines", Doc: "appends from several goroutines: offsets contiguous in global call order, each goroutine's acks in order", Randomised: true, run: casePipelinedGoroutines},
	Case{Name: "pipelined-varied", Doc: "random counts and sizes in flight: offsets advance by Count, every batch reads back", Randomised: true, run: casePipelinedVaried},
	Case{Name: "read-your-writes", Doc: "each acked append is fetchable at once from the same session", run: caseReadYourWrites},
	Case{Name: "max-size-batch", Doc: "a batch of exactly MaxBatchBytes (payload plus properties) is accepted and round-trips", run: caseMaxSizeBatch},
	Case{Name: "fetch-during-appends", Doc: "fetches racing a pipeline see contiguous prefixes holding the acked bytes", Randomised: true, run: caseFetchDuringAppends},
)

// ackOrderChecker records futures in call order and reports any that
// completed before an earlier one.
type ackOrderChecker struct {
	mu   sync.Mutex
	futs []*stream.AppendFuture
	bad  []string
	wg   sync.WaitGroup
}

// add records f as the next future in call order. The caller must add in
// call order (hold its own lock around Append and add).
func (c *ackOrderChecker) add(f *stream.AppendFuture) {
	c.mu.Lock()
	i := len(c.futs)
	var prev *stream.AppendFuture
	if i > 0 {
		prev = c.futs[i-1]
	}
	c.futs = append(c.futs, f)
	c.mu.Unlock()
	if prev == nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		<-f.Done()
		select {
		case <-prev.Done():
		default:
			c.mu.Lock()
			c.bad = append(c.bad, fmt.Sprintf("append %d completed before append %d", i, i-1))
			c.mu.Unlock()
		}
	}()
}

// check waits for the watchers and returns the first violation.
func (c *ackOrderChecker) check() error {
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bad) > 0 {
		return fmt.Errorf("acks out of call order (%d violations): %s", len(c.bad), c.bad[0])
	}
	return nil
}

func casePipelinedInOrder(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	n := e.h.scaled(500)
	var order ackOrderChecker
	futs := make([]*stream.AppendFuture, n)
	bs := make([]stream.Batch, n)
	for i := range n {
		bs[i] = batch("pio", i, 64+i%512)
		futs[i] = st.Append(e.ctx, bs[i])
		order.add(futs[i])
	}
	acks := e.waitContiguous(st, futs, bs, 0)
	next := endOf(acks)
	if err := order.check(); err != nil {
		e.t.Fatalf("%v", err)
	}
	if st.NextOffset() != next {
		e.t.Fatalf("NextOffset %d after all acks, want %d", st.NextOffset(), next)
	}
	log := e.readAll(st)
	if len(log) != n {
		e.t.Fatalf("read %d batches, appended %d", len(log), n)
	}
	e.checkHolds("read back", log, acks)
}

func casePipelinedGoroutines(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	workers := 8
	per := e.h.scaled(50)
	var (
		mu    sync.Mutex // orders Append calls globally
		calls []stream.Batch
		futs  []*stream.AppendFuture
		order ackOrderChecker
		wg    sync.WaitGroup
	)
	perWorker := make([][]*stream.AppendFuture, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				b := batch(fmt.Sprintf("pg%d", w), i, 32+(w*per+i)%700)
				mu.Lock()
				f := st.Append(e.ctx, b)
				calls = append(calls, b)
				futs = append(futs, f)
				order.add(f)
				mu.Unlock()
				perWorker[w] = append(perWorker[w], f)
			}
		}()
	}
	wg.Wait()
	acks := e.waitContiguous(st, futs, calls, 0)
	if err := order.check(); err != nil {
		e.t.Fatalf("%v", err)
	}
	for w, fs := range perWorker {
		last := int64(-1)
		for i, f := range fs {
			r, _ := f.Result()
			if r.BaseOffset <= last {
				e.t.Fatalf("goroutine %d: append %d at %d not after its previous at %d", w, i, r.BaseOffset, last)
			}
			last = r.BaseOffset
		}
	}
	e.checkHolds("read back", e.readAll(st), acks)
}

func casePipelinedVaried(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	n := e.h.scaled(300)
	maxSize := 64 << 10
	if m := e.info.MaxBatchBytes; m > 32 && m < maxSize {
		maxSize = m
	}
	futs := make([]*stream.AppendFuture, n)
	bs := make([]stream.Batch, n)
	for i := range n {
		b := batch("pv", i, 1+e.rng.IntN(maxSize-16))
		b.Count = uint32(1 + e.rng.IntN(1000))
		b.Properties = nil
		if e.rng.IntN(4) == 0 {
			b.Payload = nil
		}
		bs[i] = b
		futs[i] = st.Append(e.ctx, b)
	}
	acks := e.waitContiguous(st, futs, bs, 0)
	log := e.readAll(st)
	if len(log) != n {
		e.t.Fatalf("read %d batches, appended %d", len(log), n)
	}
	e.checkHolds("read back", log, acks)
}

func caseReadYourWrites(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	for i := range 30 {
		a := e.appendOK(st, batch("ryw", i, 100))
		bs, err := st.Fetch(e.ctx, a.Base, stream.NoEnd, 0)
		if err != nil || len(bs) == 0 {
			e.t.Fatalf("Fetch(%d) right after its ack: %d batches, err %v", a.Base, len(bs), err)
		}
		e.checkHolds("fetch after ack", bs[:1], []acked{a})
	}
}

func caseMaxSizeBatch(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	max := e.info.MaxBatchBytes
	if max <= 0 {
		e.t.Skipf("driver declares no MaxBatchBytes")
	}
	props := map[string]string{"k": "vvvv"}
	if e.info.MaxProperties == 0 {
		props = nil
	}
	b := stream.Batch{Count: 1, Properties: props, Payload: payload("maxsize", 0, max-5)}
	if props == nil {
		b.Payload = payload("maxsize", 0, max)
	}
	if b.Size() != max {
		e.t.Fatalf("test bug: batch size %d, want %d", b.Size(), max)
	}
	a := e.appendOK(st, b)
	small := e.appendOK(st, batch("maxsize", 1, 10))
	e.checkHolds("read back", e.readAll(st), []acked{a, small})
}

func caseFetchDuringAppends(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	n := e.h.scaled(300)
	bs := make([]stream.Batch, n)
	for i := range n {
		bs[i] = batch("fda", i, 16+e.rng.IntN(2000))
	}
	var (
		mu    sync.Mutex
		acks  = map[int64]stream.Batch{}
		done  = make(chan struct{})
		fails []string
	)
	var readers sync.WaitGroup
	for r := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				log, err := readFrom(e.ctx, st, 0, 1000*(r+1))
				mu.Lock()
				if err != nil {
					fails = append(fails, err.Error())
				} else if len(log) > 0 && log[0].BaseOffset != 0 {
					fails = append(fails, fmt.Sprintf("read from 0 starts at %d", log[0].BaseOffset))
				}
				for _, b := range log {
					if want, ok := acks[b.BaseOffset]; ok {
						if err := sameBatch(b, want); err != nil {
							fails = append(fails, fmt.Sprintf("offset %d: %v", b.BaseOffset, err))
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	futs := make([]*stream.AppendFuture, n)
	for i := range n {
		futs[i] = st.Append(e.ctx, bs[i])
	}
	var all []acked
	for i, f := range futs {
		r, err := f.Wait(e.ctx)
		if err != nil {
			close(done)
			readers.Wait()
			e.t.Fatalf("append %d: %v", i, err)
		}
		mu.Lock()
		acks[r.BaseOffset] = bs[i]
		mu.Unlock()
		all = append(all, acked{Base: r.BaseOffset, Batch: bs[i]})
	}
	close(done)
	readers.Wait()
	if len(fails) > 0 {
		e.t.Fatalf("concurrent readers saw %d problems; first: %s", len(fails), fails[0])
	}
	e.checkHolds("final read", e.readAll(st), all)
}
