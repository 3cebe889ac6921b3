package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/stratastream/strata/stream"
)

// The three encodings of the layer. Each starts with a magic and a version
// byte, so that an object of another kind or another layer is ErrCorrupt.
//
//	WAL batch (one base batch of a WAL stream, Count 1):
//	  "SWB1" | session id (16) | entry count u32 | entries
//	  entry: claim (16) | base i64 | count u32 | timestamp i64 |
//	         props u16 | (klen u16, k, vlen u32, v)* | plen u32 | payload | crc32c(payload) u32
//	meta record (one base batch of V.meta, Count 1):
//	  "SMR1" | kind u8 | incarnation (16) | claim (16) | wal name (u16 len) |
//	  from i64 | compacted i64 | start i64 | name (u16 len)
//	data run (one base batch of V.data holding consecutive virtual batches,
//	Count = the sum of their Counts):
//	  "SDB2" | incarnation (16) | base i64 | batch count u32 | batches
//	  batch: count u32 | timestamp i64 | props | plen u32 | payload | crc32c(payload) u32
//	data batch of earlier versions (one virtual batch, still read):
//	  "SDB1" | incarnation (16) | base i64 | props | plen u32 | payload | crc32c(payload) u32
//
// The base store checksums each base batch end to end; the inner CRC of an
// entry's payload is what the layer checks when it serves the payload.

var (
	walMagic  = [4]byte{'S', 'W', 'B', '1'}
	metaMagic = [4]byte{'S', 'M', 'R', '1'}
	dataMagic = [4]byte{'S', 'D', 'B', '1'}
	runMagic  = [4]byte{'S', 'D', 'B', '2'}
)

// id is a 16-byte random identifier: a WAL session, an incarnation of a
// virtual stream, or one claim of a virtual stream on a WAL.
type id [16]byte

func (i id) String() string { return fmt.Sprintf("%x", i[:]) }

// entryOverhead bounds the bytes an entry adds to its batch's payload and
// properties (the fixed fields and the per-property lengths).
const entryOverhead = 16 + 8 + 4 + 8 + 2 + 4 + 4

// entry is one virtual batch inside a WAL batch.
type entry struct {
	claim id
	base  int64
	count uint32
	ts    int64
	props map[string]string
	// payload aliases the decoded WAL batch (or the caller's buffer before
	// the flush).
	payload []byte
	crc     uint32
	// checked is set once payload was found to match crc. The bytes it
	// aliases never change, so it is checked once, not at every read.
	checked atomic.Bool
}

func (e *entry) end() int64 { return e.base + int64(e.count) }

// size is what the entry costs in a WAL batch.
func (e *entry) size() int {
	n := entryOverhead + len(e.payload)
	for k, v := range e.props {
		n += 6 + len(k) + len(v)
	}
	return n
}

func (e *entry) batch() stream.Batch {
	return stream.Batch{BaseOffset: e.base, Count: e.count, Timestamp: e.ts, Properties: maps.Clone(e.props), Payload: e.payload}
}

func appendProps(b []byte, props map[string]string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
	for _, k := range slices.Sorted(maps.Keys(props)) {
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(props[k])))
		b = append(b, props[k]...)
	}
	return b
}

// encodeWALBatch encodes entries as one WAL batch payload of session sid
// (encodeWALBatchInto, into a buffer of its own).
func encodeWALBatch(sid id, entries []*entry) ([]byte, uint32, bool) {
	size := walBatchHeader
	for _, e := range entries {
		size += e.size()
	}
	b := make([]byte, size)
	sum, all := encodeWALBatchInto(b, sid, entries)
	return b, sum, all
}

// walBatchHeader is the length of a WAL batch's fields before its entries.
const walBatchHeader = 4 + 16 + 4

// encodeWALBatchInto encodes entries as one WAL batch payload of session
// sid into p, of exactly the batch's length (walBatchHeader and the
// entries' sizes), and points each entry's payload at its copy in p: the
// tails keep the batch for reads until compaction. It checks each copy
// against the checksum Append took as it copies (stream.CopyChecksum), and
// marks an entry whose copy matches checked: the tail then serves and
// compacts it without reading it again. It returns the payload's
// checksum, combined from the entries' checksums without another pass,
// and whether that is the payload's, that is whether every copy
// matched. One that does not (a caller that changed its buffer
// before its append completed) stays unchecked: the caller checksums the
// batch's bytes instead, and reads of that entry fail ErrCorrupt, of no
// other.
func encodeWALBatchInto(p []byte, sid id, entries []*entry) (uint32, bool) {
	b := p[:0:len(p)]
	b = append(b, walMagic[:]...)
	b = append(b, sid[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	crc := stream.Checksum(b)
	all := true
	for _, e := range entries {
		mark := len(b)
		b = append(b, e.claim[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(e.base))
		b = binary.BigEndian.AppendUint32(b, e.count)
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = appendProps(b, e.props)
		b = binary.BigEndian.AppendUint32(b, uint32(len(e.payload)))
		crc = stream.UpdateChecksum(crc, b[mark:])
		mark = len(b)
		b = b[:mark+len(e.payload)]
		if stream.CopyChecksum(0, b[mark:], e.payload) == e.crc {
			e.checked.Store(true)
		} else {
			all = false
		}
		e.payload = b[mark:len(b):len(b)]
		crc = stream.CombineChecksum(crc, e.crc, len(e.payload))
		mark = len(b)
		b = binary.BigEndian.AppendUint32(b, e.crc)
		crc = stream.UpdateChecksum(crc, b[mark:])
	}
	if len(b) != len(p) || cap(b) != len(p) {
		panic(fmt.Sprintf("wal: a WAL batch encoded to %d bytes, sized %d", len(b), len(p)))
	}
	return crc, all
}

// errShort is the decoders' error for bytes that end too early.
var errShort = errors.New("truncated")

// reader decodes big-endian fields, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = errShort
		r.b = nil
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8() byte {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16() int {
	if p := r.take(2); p != nil {
		return int(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *reader) i64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (r *reader) id() (i id) {
	copy(i[:], r.take(16))
	return i
}

func (r *reader) str16() string { return string(r.take(r.u16())) }

func (r *reader) props() map[string]string {
	n := r.u16()
	if n == 0 {
		return nil
	}
	m := make(map[string]string, min(n, 64))
	for range n {
		k := r.str16()
		v := string(r.take(int(r.u32())))
		if r.err != nil {
			return nil
		}
		m[k] = v
	}
	return m
}

func (r *reader) magic(want [4]byte) {
	if p := r.take(4); p != nil && [4]byte(p) != want {
		r.err = fmt.Errorf("magic %q, want %q", p, want[:])
	}
}

// decodeWALBatch decodes a WAL batch payload of session sid. Its entries'
// payloads alias p.
func decodeWALBatch(sid id, p []byte) ([]*entry, error) {
	r := &reader{b: p}
	r.magic(walMagic)
	if got := r.id(); r.err == nil && got != sid {
		return nil, fmt.Errorf("%w: WAL batch of session %s in the WAL of session %s", stream.ErrCorrupt, got, sid)
	}
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(r.b)/entryOverhead) {
		r.err = fmt.Errorf("%d entries in %d bytes", n, len(r.b))
	}
	var out []*entry
	for i := uint32(0); i < n && r.err == nil; i++ {
		e := &entry{claim: r.id(), base: r.i64(), count: r.u32(), ts: r.i64()}
		e.props = r.props()
		e.payload = r.take(int(r.u32()))
		e.crc = r.u32()
		out = append(out, e)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the last entry", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: WAL batch: %v", stream.ErrCorrupt, r.err)
	}
	return out, nil
}

// record kinds (informational: a record's WAL field is what W3 and W4 read).
const (
	kindClaim   = 1 // claims the writer's WAL for V's next appends (W2)
	kindCompact = 2 // V.data holds V up to Compacted; the tail moved on (W6)
	kindPark    = 3 // no tail in any WAL: the next append claims again
	kindTrim    = 4 // a new start offset
	kindClose   = 5 // graceful close with the tail compacted (W5)
)

// record is one V.meta record. Every record carries the whole state a
// reader or a new owner needs (W2): the incarnation, the WAL holding the
// tail (if any) and the WAL offset from which V's entries of this claim
// start, how far V.data holds V, and V's start offset.
type record struct {
	kind      byte
	inc       id
	claim     id     // zero when wal is ""
	wal       string // base name of the WAL holding the tail; "" for none
	from      int64  // WAL offset at or below the first entry of this claim
	compacted int64  // V.data holds V's batches below this (informational; V.data's NextOffset is the truth)
	start     int64  // V's start offset
	name      string // V's name
	// tagged: the incarnation's data stream is dataName(name, inc), not
	// legacyDataName(name) (encoded as a trailing flags byte, absent in
	// records of earlier builds).
	tagged bool
}

// recordTagged is the record flag of tagged.
const recordTagged = 1

func (r *record) encode() []byte {
	b := make([]byte, 0, 64+len(r.wal)+len(r.name))
	b = append(b, metaMagic[:]...)
	b = append(b, r.kind)
	b = append(b, r.inc[:]...)
	b = append(b, r.claim[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.wal)))
	b = append(b, r.wal...)
	b = binary.BigEndian.AppendUint64(b, uint64(r.from))
	b = binary.BigEndian.AppendUint64(b, uint64(r.compacted))
	b = binary.BigEndian.AppendUint64(b, uint64(r.start))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.name)))
	b = append(b, r.name...)
	if r.tagged {
		b = append(b, recordTagged)
	}
	return b
}

func decodeRecord(p []byte) (record, error) {
	r := &reader{b: p}
	r.magic(metaMagic)
	rec := record{kind: r.u8(), inc: r.id(), claim: r.id(), wal: r.str16(), from: r.i64(), compacted: r.i64(), start: r.i64(), name: r.str16()}
	if r.err == nil && len(r.b) == 1 && r.b[0] == recordTagged {
		rec.tagged, r.b = true, nil
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err == nil && (rec.kind < kindClaim || rec.kind > kindClose || rec.from < 0 || rec.compacted < 0 || rec.start < 0) {
		r.err = fmt.Errorf("bad fields (kind %d, from %d, compacted %d, start %d)", rec.kind, rec.from, rec.compacted, rec.start)
	}
	if r.err != nil {
		return record{}, fmt.Errorf("%w: meta record: %v", stream.ErrCorrupt, r.err)
	}
	return rec, nil
}

// runHeader and runEntryOverhead are what a data run costs besides the
// batches' properties and payloads.
const (
	runHeader        = 4 + 16 + 8 + 4
	runEntryOverhead = 4 + 8 + 2 + 4 + 4
)

// runSize is what e costs in a data run.
func runSize(e *entry) int {
	n := runEntryOverhead + len(e.payload)
	for k, v := range e.props {
		n += 6 + len(k) + len(v)
	}
	return n
}

// encodeRun wraps consecutive virtual batches (each continuing the one
// before) as one V.data batch, bound to V's incarnation. It returns the
// batch with its payload checksum supplied: the entries' checksums,
// combined, so the base store need not read the payloads again. Callers
// check the entries first (entry.verified).
func encodeRun(inc id, entries []*entry) stream.Batch {
	return encodeRunInto(nil, inc, entries)
}

// encodeRunInto is encodeRun into dst's memory when it has room.
func encodeRunInto(dst []byte, inc id, entries []*entry) stream.Batch {
	b := runBatch(entries)
	n := runBytes(entries)
	p := dst[:0]
	if cap(p) < n {
		p = make([]byte, 0, n)
	}
	p = p[:n]
	b.Payload, b.PayloadChecksum, b.PayloadChecksumSet = p, fillRun(p, inc, entries), true
	return b
}

// runBatch is the V.data batch of a run of entries without its payload:
// their record count and the last one's timestamp.
func runBatch(entries []*entry) stream.Batch {
	var count uint32
	for _, e := range entries {
		count += e.count
	}
	return stream.Batch{Count: count, Timestamp: entries[len(entries)-1].ts}
}

// runBytes is the size of a run of entries encoded.
func runBytes(entries []*entry) int {
	n := runHeader
	for _, e := range entries {
		n += runSize(e)
	}
	return n
}

// fillRun encodes the run of entries into p (len(p) == runBytes(entries))
// and returns its CRC-32C, combined from the entries' checksums rather than
// read from the copies.
func fillRun(p []byte, inc id, entries []*entry) uint32 {
	b := p[:0:len(p)]
	b = append(b, runMagic[:]...)
	b = append(b, inc[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(entries[0].base))
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	crc := stream.Checksum(b)
	for _, e := range entries {
		mark := len(b)
		b = binary.BigEndian.AppendUint32(b, e.count)
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = appendProps(b, e.props)
		b = binary.BigEndian.AppendUint32(b, uint32(len(e.payload)))
		crc = stream.UpdateChecksum(crc, b[mark:])
		b = append(b, e.payload...)
		crc = stream.CombineChecksum(crc, e.crc, len(e.payload))
		mark = len(b)
		b = binary.BigEndian.AppendUint32(b, e.crc)
		crc = stream.UpdateChecksum(crc, b[mark:])
	}
	if len(b) != len(p) || cap(b) != len(p) {
		panic(fmt.Sprintf("wal: a run encoded to %d bytes, sized %d", len(b), len(p)))
	}
	return crc
}

// decodeData appends to out the virtual batches of a V.data batch (a run,
// or a single batch of an earlier version); their payloads alias b's. A
// batch stored at another offset than the virtual batches it holds (a base
// that landed a later append in an earlier one's place) is ErrCorrupt, as
// W4 says, never served (b.BaseOffset < 0 skips that check).
func decodeData(inc id, name string, b stream.Batch, out []stream.Batch) ([]stream.Batch, error) {
	r := &reader{b: b.Payload}
	magic := [4]byte(r.take(4))
	if r.err == nil && magic != runMagic && magic != dataMagic {
		r.err = fmt.Errorf("magic %q, want %q", magic[:], runMagic[:])
	}
	if got := r.id(); r.err == nil && got != inc {
		return out, fmt.Errorf("%w: stream %q: V.data batch at %d belongs to incarnation %s, not %s", stream.ErrCorrupt, name, b.BaseOffset, got, inc)
	}
	base := r.i64()
	if r.err == nil && b.BaseOffset >= 0 && base != b.BaseOffset {
		return out, fmt.Errorf("%w: stream %q: V.data holds the batch of offset %d at %d", stream.ErrCorrupt, name, base, b.BaseOffset)
	}
	n, sum := 1, uint32(0)
	if magic == runMagic {
		n = int(r.u32())
		if r.err == nil && (n == 0 || n > len(r.b)/runEntryOverhead) {
			r.err = fmt.Errorf("bad batch count %d", n)
		}
	}
	first := len(out)
	for i := 0; i < n && r.err == nil; i++ {
		vb := stream.Batch{BaseOffset: base, Count: b.Count, Timestamp: b.Timestamp}
		if magic == runMagic {
			vb.Count, vb.Timestamp = r.u32(), r.i64()
		}
		vb.Properties = r.props()
		vb.Payload = r.take(int(r.u32()))
		if crc := r.u32(); r.err == nil && stream.Checksum(vb.Payload) != crc {
			out = out[:first]
			return out, fmt.Errorf("%w: stream %q: batch at %d: payload checksum mismatch", stream.ErrCorrupt, name, base)
		}
		if r.err == nil && magic == runMagic && vb.Count == 0 {
			r.err = fmt.Errorf("batch at %d of count 0", base)
		}
		out = append(out, vb)
		base += int64(vb.Count)
		sum += vb.Count
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err == nil && b.BaseOffset >= 0 && sum != b.Count {
		r.err = fmt.Errorf("its batches count %d offsets, the batch %d", sum, b.Count)
	}
	if r.err != nil {
		return out[:first], fmt.Errorf("%w: stream %q: V.data batch at %d: %v", stream.ErrCorrupt, name, b.BaseOffset, r.err)
	}
	return out, nil
}

// verified returns e's batch after checking its payload checksum (once:
// the bytes never change).
func (e *entry) verified(name string) (stream.Batch, error) {
	if !e.checked.Load() {
		if stream.Checksum(e.payload) != e.crc {
			return stream.Batch{}, fmt.Errorf("%w: stream %q: batch at %d: payload checksum mismatch", stream.ErrCorrupt, name, e.base)
		}
		e.checked.Store(true)
	}
	return e.batch(), nil
}

// detached returns a copy of e with a payload of its own.
func (e *entry) detached() *entry {
	c := &entry{claim: e.claim, base: e.base, count: e.count, ts: e.ts, props: e.props, payload: bytes.Clone(e.payload), crc: e.crc}
	c.checked.Store(e.checked.Load())
	return c
}
