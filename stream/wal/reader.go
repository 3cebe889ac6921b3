package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stratastream/strata/stream"
)

// roStream is a read-only session on a virtual stream. It reconstructs
// the log as W4 says: V.data from the start, then the entries of the last
// record's claim in its WAL that continue V.data exactly. It never fences.
type roStream struct {
	s     *Store
	name  string
	meta  *stream.Stream
	data  *stream.Stream // nil until the incarnation's data stream exists
	dname string         // data's base name

	mu       sync.Mutex
	closed   bool
	have     bool
	rec      record
	start    int64
	dataNext int64
	next     int64
	wal      *stream.Stream // read-only on rec.wal
	walSID   id
	walPos   int64       // next WAL offset to read
	scanned  []tailEntry // entries of rec.claim read from the WAL
	cont     []tailEntry // those that continue V.data
}

func (s *Store) openRO(ctx context.Context, name string) (stream.DriverStream, error) {
	ro := stream.OpenOptions{Mode: stream.ModeReadOnly}
	meta, err := s.base.Open(ctx, metaName(name), ro)
	if errors.Is(err, stream.ErrNotFound) && !s.internal(name) {
		if st, lerr := s.base.Open(ctx, name, ro); lerr == nil {
			return st, nil // a legacy stream
		}
	}
	if err != nil {
		return nil, err
	}
	r := &roStream{s: s, name: name, meta: meta}
	if err := r.refresh(ctx); err != nil {
		r.closeBase()
		return nil, err
	}
	return r, nil
}

func (r *roStream) closeBase() {
	for _, st := range []*stream.Stream{r.meta, r.data, r.wal} {
		if st != nil {
			_ = st.Close()
		}
	}
}

// closeData drops the data stream session.
func (r *roStream) closeData() {
	if r.data != nil {
		_ = r.data.Close()
		r.data, r.dname = nil, ""
	}
}

// Name is the virtual stream's name.
func (r *roStream) Name() string { return r.name }

// Epoch is 0: read-only sessions have none.
func (r *roStream) Epoch() uint64 { return 0 }

// StartOffset is the start as of the last refresh.
func (r *roStream) StartOffset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start
}

// NextOffset is the end of the log as of the last refresh.
func (r *roStream) NextOffset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// Append fails: the session is read-only.
func (r *roStream) Append(context.Context, stream.Batch) *stream.AppendFuture {
	return stream.FailedAppend(fmt.Errorf("%w: stream %q is open read-only", stream.ErrInvalidArgument, r.name))
}

// Trim fails: the session is read-only.
func (r *roStream) Trim(context.Context, int64) error {
	return fmt.Errorf("%w: stream %q is open read-only", stream.ErrInvalidArgument, r.name)
}

// Close releases the session.
func (r *roStream) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("%w: stream %q", stream.ErrClosed, r.name)
	}
	r.closed = true
	r.closeBase()
	return nil
}

// Fetch refreshes the view when start reaches its end (read-after-ack),
// then serves V.data and the WAL tail.
func (r *roStream) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if maxBytes <= 0 || maxBytes > r.s.info.MaxFetchBytes {
		maxBytes = r.s.info.MaxFetchBytes
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: stream %q", stream.ErrClosed, r.name)
	}
	for attempt := 0; ; attempt++ {
		if start >= r.next || start < r.start || attempt > 0 {
			if err := r.refreshLocked(ctx); err != nil {
				return nil, err
			}
		}
		if start < r.start || start > r.next {
			return nil, fmt.Errorf("%w: stream %q: offset %d outside [%d, %d]", stream.ErrOffsetOutOfRange, r.name, start, r.start, r.next)
		}
		e := min(end, r.next)
		if start >= e {
			return nil, nil
		}
		out, err := fetchFrom(ctx, r.s, r.name, r.rec.inc, r.data, r.dataNext, r.cont, start, e, maxBytes)
		if err != nil && attempt < 4 && errors.Is(err, stream.ErrOffsetOutOfRange) {
			continue // V.data was trimmed or compacted under us: look again
		}
		return out, err
	}
}

func (r *roStream) refresh(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refreshLocked(ctx)
}

// refreshLocked rereads V.meta's last record, V.data's end and the WAL
// range the record names (W6: a range trimmed or deleted meanwhile means
// the record moved on: read it again).
func (r *roStream) refreshLocked(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = r.refreshOnce(ctx); err == nil || !retryable(err) {
			return err
		}
	}
	return err
}

func retryable(err error) bool {
	return errors.Is(err, stream.ErrOffsetOutOfRange) || errors.Is(err, stream.ErrNotFound) && !errors.Is(err, errStreamGone)
}

var errStreamGone = errors.New("stream deleted")

func (r *roStream) refreshOnce(ctx context.Context) error {
	// The last record: fetching at the known end makes a read-only
	// session look for records appended since.
	if _, err := r.meta.Fetch(ctx, r.meta.NextOffset(), stream.NoEnd, 1); err != nil && !errors.Is(err, stream.ErrOffsetOutOfRange) {
		return err
	}
	rec, ok, err := lastRecord(ctx, r.meta)
	if err != nil {
		return err
	}
	if ok && rec.name != r.name {
		return fmt.Errorf("%w: stream %q: its meta stream holds a record of stream %q", stream.ErrCorrupt, r.name, rec.name)
	}
	if !ok {
		// No record yet: nothing appended (a new incarnation's first
		// append claims, with a record, before it is acknowledged).
		r.closeData()
		r.have, r.rec, r.start, r.dataNext, r.next = false, record{}, 0, 0, 0
		return nil
	}
	if dname := rec.dataName(); r.data != nil && r.dname != dname {
		r.closeData() // another incarnation since the last refresh
	}
	if r.data == nil {
		d, err := r.s.base.Open(ctx, rec.dataName(), stream.OpenOptions{Mode: stream.ModeReadOnly})
		switch {
		case errors.Is(err, stream.ErrNotFound) && rec.tagged && rec.compacted == 0:
			// The incarnation has not copied to its data stream yet (it
			// creates it then): V.data is empty.
		case errors.Is(err, stream.ErrNotFound):
			return fmt.Errorf("%w: stream %q: %w", stream.ErrNotFound, r.name, errStreamGone)
		case err != nil:
			return err
		default:
			r.data, r.dname = d, rec.dataName()
		}
	}
	var dataNext int64
	if r.data != nil {
		if _, err := r.data.Fetch(ctx, r.data.NextOffset(), stream.NoEnd, 1); err != nil && !errors.Is(err, stream.ErrOffsetOutOfRange) {
			return err
		}
		dataNext = r.data.NextOffset()
	}
	if rec.wal != r.rec.wal || rec.claim != r.rec.claim || !r.have {
		if r.wal != nil && rec.wal != r.rec.wal {
			_ = r.wal.Close()
			r.wal = nil
		}
		r.walPos, r.scanned = rec.from, nil
	}
	if rec.from > r.walPos {
		r.walPos = rec.from
	}
	if rec.wal != "" {
		if err := r.scanWAL(ctx, rec); err != nil {
			if !errors.Is(err, stream.ErrNotFound) || !r.stillLast(ctx, rec) {
				return err
			}
			// Deleted by a sweeper before the record landed, so it held
			// nothing of the record's claim (see readWAL).
			r.scanned = nil
		}
	} else {
		r.scanned = nil
	}
	cont, err := continuation(r.name, dataNext, r.scanned, false)
	if err != nil {
		return err
	}
	next := dataNext
	if len(cont) > 0 {
		next = cont[len(cont)-1].e.end()
	}
	r.have, r.rec, r.start, r.dataNext, r.cont, r.next = true, rec, rec.start, dataNext, cont, next
	// Entries V.data now holds need not be kept.
	k := 0
	for k < len(r.scanned) && r.scanned[k].e.end() <= dataNext {
		k++
	}
	r.scanned = r.scanned[k:]
	return nil
}

// stillLast says rec is still V.meta's last record.
func (r *roStream) stillLast(ctx context.Context, rec record) bool {
	if _, err := r.meta.Fetch(ctx, r.meta.NextOffset(), stream.NoEnd, 1); err != nil && !errors.Is(err, stream.ErrOffsetOutOfRange) {
		return false
	}
	now, ok, err := lastRecord(ctx, r.meta)
	return err == nil && ok && now == rec
}

// scanWAL reads the record's WAL from walPos to its end, keeping the
// entries of the record's claim.
func (r *roStream) scanWAL(ctx context.Context, rec record) error {
	if r.wal == nil {
		sid, ok := r.s.parseWALName(rec.wal)
		if !ok {
			return fmt.Errorf("%w: stream %q: its record names %q, not a WAL", stream.ErrCorrupt, r.name, rec.wal)
		}
		st, err := r.s.openWAL(ctx, rec.wal, stream.OpenOptions{Mode: stream.ModeReadOnly})
		if err != nil {
			return fmt.Errorf("stream %q: opening WAL %s: %w", r.name, rec.wal, err)
		}
		r.wal, r.walSID = st, sid
	}
	for {
		bs, err := r.wal.Fetch(ctx, r.walPos, stream.NoEnd, 0)
		if err != nil {
			if errors.Is(err, stream.ErrOffsetOutOfRange) && r.walPos > r.wal.NextOffset() {
				return nil // nothing past walPos yet
			}
			return fmt.Errorf("stream %q: reading WAL %s at %d: %w", r.name, rec.wal, r.walPos, err)
		}
		if len(bs) == 0 {
			return nil
		}
		for _, b := range bs {
			es, err := decodeWALBatch(r.walSID, b.Payload)
			if err != nil {
				return fmt.Errorf("stream %q: WAL %s at %d: %w", r.name, rec.wal, b.BaseOffset, err)
			}
			for _, e := range es {
				if e.claim == rec.claim {
					r.scanned = append(r.scanned, tailEntry{e: e, walOff: b.BaseOffset})
				}
			}
			r.walPos = b.EndOffset()
		}
	}
}
