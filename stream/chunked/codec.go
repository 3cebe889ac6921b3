package chunked

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/stratastream/strata/stream"
)

// Binary encodings of every object the engine writes (docs/engine.md,
// "Encodings"). Each starts with a two-byte magic and a version byte and ends
// with (or carries) a CRC32C; decoders check every length against the bytes
// present and return errors wrapping stream.ErrCorrupt, never wrong data.

const codecVersion = 1

// boundFlag, set in an object's version byte, says that its checksum is
// bound to the identity of what it belongs to: the stored CRC32C is the
// CRC32C of the object XOR a seed, the CRC32C of the stream name and
// incarnation id (layout.seed; generations: of the name, genSeed). An
// object copied from another stream or incarnation (the same key, another
// root) fails its checksum: ErrCorrupt, never served as data. Objects
// without the flag (written before it existed) are read with seed 0.
const boundFlag = 0x80

// seedFor is the seed an object with version byte ver is checked with.
func seedFor(ver byte, seed uint32) uint32 {
	if ver&boundFlag == 0 {
		return 0
	}
	return seed
}

var (
	magicChunk    = [2]byte{'S', 'C'}
	magicManifest = [2]byte{'S', 'M'}
	magicGen      = [2]byte{'S', 'G'}
	magicHint     = [2]byte{'S', 'H'}
	magicPage     = [2]byte{'S', 'X'}
)

var errCorrupt = stream.ErrCorrupt

func corruptf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errCorrupt}, a...)...)
}

// putID is the unique id of one put (R1): an object is one's own only if it
// carries the id of that very put.
type putID [16]byte

// sessionKey orders sessions: by epoch, then by the version of the manifest
// their open wrote (R5). The delete fence is the largest key.
type sessionKey struct{ Epoch, Session uint64 }

var deleteSession = sessionKey{^uint64(0), ^uint64(0)}

func (a sessionKey) less(b sessionKey) bool {
	return a.Epoch < b.Epoch || a.Epoch == b.Epoch && a.Session < b.Session
}

func (a sessionKey) String() string {
	if a == deleteSession {
		return "delete"
	}
	return fmt.Sprintf("e%d/s%d", a.Epoch, a.Session)
}

// ---- chunks ----

const (
	chunkData  = 1
	chunkFence = 2
)

const chunkHeaderLen = 68

// chunkHeader is the fixed-size head of a chunk object; a walk reads only it.
type chunkHeader struct {
	Kind    byte
	Sess    sessionKey
	Base    int64
	Count   uint64
	Batches uint32
	BodyLen uint32
	BodyCRC uint32
	PutID   putID
}

func (h chunkHeader) end() int64 { return h.Base + int64(h.Count) }

// encodeChunk encodes a chunk holding batches (their BaseOffset must be
// contiguous from base). A fence chunk has no batches. The append path
// builds the same bytes in place (writer.go: segments, sealChunk).
func encodeChunk(seed uint32, kind byte, sess sessionKey, base int64, id putID, batches []stream.Batch) []byte {
	size := chunkHeaderLen
	for _, b := range batches {
		size += batchEncodedLen(b)
	}
	buf := make([]byte, size)
	off := chunkHeaderLen
	spans := make([]batchSpan, len(batches))
	for i, b := range batches {
		n := batchEncodedLen(b)
		spans[i] = batchSpan{off: off, n: n, count: b.Count, rest: encodeBatchBody(buf[off:off+n], b)}
		off += n
	}
	sealChunk(buf, seed, kind, sess, base, id, spans)
	return buf
}

// batchSpan is one encoded batch inside a chunk buffer: n bytes at off,
// everything but its base offset and checksum written, rest the CRC32C of
// the bytes between those two fields.
type batchSpan struct {
	off, n int
	count  uint32
	rest   uint32
}

// combineMin is the batch size from which checksums are combined rather
// than recomputed: below it a pass over the bytes is cheaper.
const combineMin = 8 << 10

// sealChunk completes a chunk whose batches were encoded in buf (at spans,
// back to back from chunkHeaderLen to the end of buf): it writes every
// batch's base offset (contiguous from base) and checksum, and the header.
// No payload byte is read again for batches of combineMin bytes or more.
func sealChunk(buf []byte, seed uint32, kind byte, sess sessionKey, base int64, id putID, spans []batchSpan) {
	var bodyCRC uint32
	next := base
	for _, sp := range spans {
		e := buf[sp.off : sp.off+sp.n]
		binary.BigEndian.PutUint64(e, uint64(next))
		next += int64(sp.count)
		var crc uint32
		if sp.n < combineMin {
			crc = stream.Checksum(e[:sp.n-4])
			binary.BigEndian.PutUint32(e[sp.n-4:], crc)
			bodyCRC = stream.UpdateChecksum(bodyCRC, e)
			continue
		}
		crc = stream.CombineChecksum(stream.Checksum(e[:8]), sp.rest, sp.n-12)
		binary.BigEndian.PutUint32(e[sp.n-4:], crc)
		bodyCRC = stream.CombineChecksum(bodyCRC, stream.UpdateChecksum(crc, e[sp.n-4:]), sp.n)
	}
	h := chunkHeader{Kind: kind, Sess: sess, Base: base, Count: uint64(next - base), Batches: uint32(len(spans)),
		BodyLen: uint32(len(buf) - chunkHeaderLen), BodyCRC: bodyCRC, PutID: id}
	putChunkHeader(buf[:chunkHeaderLen], h, seed)
}

func putChunkHeader(b []byte, h chunkHeader, seed uint32) {
	b[0], b[1], b[2], b[3] = magicChunk[0], magicChunk[1], codecVersion|boundFlag, h.Kind
	binary.BigEndian.PutUint64(b[4:], h.Sess.Epoch)
	binary.BigEndian.PutUint64(b[12:], h.Sess.Session)
	binary.BigEndian.PutUint64(b[20:], uint64(h.Base))
	binary.BigEndian.PutUint64(b[28:], h.Count)
	binary.BigEndian.PutUint32(b[36:], h.Batches)
	binary.BigEndian.PutUint32(b[40:], h.BodyLen)
	binary.BigEndian.PutUint32(b[44:], h.BodyCRC)
	copy(b[48:64], h.PutID[:])
	binary.BigEndian.PutUint32(b[64:], stream.Checksum(b[:64])^seed)
}

// decodeChunkHeader decodes the first chunkHeaderLen bytes of a chunk of
// the incarnation whose seed is seed.
func decodeChunkHeader(b []byte, seed uint32) (chunkHeader, error) {
	var h chunkHeader
	if len(b) < chunkHeaderLen {
		return h, corruptf("chunk header: %d bytes, want %d", len(b), chunkHeaderLen)
	}
	if b[0] != magicChunk[0] || b[1] != magicChunk[1] {
		return h, corruptf("chunk header: bad magic %q", b[:2])
	}
	if b[2]&^boundFlag != codecVersion {
		return h, corruptf("chunk header: unknown version %d", b[2])
	}
	if got, want := stream.Checksum(b[:64])^seedFor(b[2], seed), binary.BigEndian.Uint32(b[64:]); got != want {
		return h, corruptf("chunk header: checksum %08x, stored %08x (another stream's or incarnation's chunk?)", got, want)
	}
	h.Kind = b[3]
	h.Sess.Epoch = binary.BigEndian.Uint64(b[4:])
	h.Sess.Session = binary.BigEndian.Uint64(b[12:])
	h.Base = int64(binary.BigEndian.Uint64(b[20:]))
	h.Count = binary.BigEndian.Uint64(b[28:])
	h.Batches = binary.BigEndian.Uint32(b[36:])
	h.BodyLen = binary.BigEndian.Uint32(b[40:])
	h.BodyCRC = binary.BigEndian.Uint32(b[44:])
	copy(h.PutID[:], b[48:64])
	switch {
	case h.Kind != chunkData && h.Kind != chunkFence:
		return h, corruptf("chunk header: unknown kind %d", h.Kind)
	case h.Base < 0 || h.Count > 1<<62 || h.Base > 1<<62:
		return h, corruptf("chunk header: offsets base %d count %d out of range", h.Base, h.Count)
	case h.Kind == chunkFence && (h.Count != 0 || h.Batches != 0 || h.BodyLen != 0):
		return h, corruptf("chunk header: fence chunk with %d batches", h.Batches)
	case h.Kind == chunkData && (h.Count == 0 || h.Batches == 0 || uint64(h.Batches) > h.Count):
		return h, corruptf("chunk header: data chunk with %d batches and count %d", h.Batches, h.Count)
	}
	return h, nil
}

// decodeChunk decodes a whole chunk object and checks every checksum.
// Returned batches alias b.
func decodeChunk(b []byte, seed uint32) (chunkHeader, []stream.Batch, error) {
	h, err := decodeChunkHeader(b, seed)
	if err != nil {
		return h, nil, err
	}
	body := b[chunkHeaderLen:]
	if uint64(len(body)) != uint64(h.BodyLen) {
		return h, nil, corruptf("chunk body: %d bytes, header says %d", len(body), h.BodyLen)
	}
	if got := stream.Checksum(body); got != h.BodyCRC {
		return h, nil, corruptf("chunk body: checksum %08x, stored %08x", got, h.BodyCRC)
	}
	batches := make([]stream.Batch, 0, h.Batches)
	next := h.Base
	for i := uint32(0); i < h.Batches; i++ {
		bt, n, err := decodeBatch(body)
		if err != nil {
			return h, nil, fmt.Errorf("batch %d: %w", i, err)
		}
		if bt.BaseOffset != next {
			return h, nil, corruptf("batch %d: base offset %d, want %d", i, bt.BaseOffset, next)
		}
		next += int64(bt.Count)
		body = body[n:]
		batches = append(batches, bt)
	}
	if len(body) != 0 || next != h.end() {
		return h, nil, corruptf("chunk body: %d trailing bytes, batches end at %d, header at %d", len(body), next, h.end())
	}
	return h, batches, nil
}

// ---- batches ----

const batchFixedLen = 8 + 4 + 8 + 4 + 4 + 4 // base, count, timestamp, nprops, payload len, crc

func batchEncodedLen(b stream.Batch) int {
	n := batchFixedLen + len(b.Payload)
	for k, v := range b.Properties {
		n += 8 + len(k) + len(v)
	}
	return n
}

// encodeBatchBody writes the encoding of b into e (len(e) ==
// batchEncodedLen(b)) except its first 8 bytes (the base offset, assigned
// at the cut) and its last 4 (the checksum, which covers the base), and
// returns the CRC32C of the bytes in between (0 for batches below
// combineMin, which sealChunk checksums whole). The payload is copied and
// checksummed block by block (stream.CopyChecksum), so it is read from
// memory once; when the caller supplied its checksum
// (b.PayloadChecksumSet) it is only copied, and the supplied checksum is
// combined with the fields before it. The
// stored checksums then derive from the supplied one, so a wrong one makes
// the chunk fail verification (decodeChunk, chunkCache.get): the batch is
// never served.
func encodeBatchBody(e []byte, b stream.Batch) uint32 {
	off := encodeBatchFields(e, b, len(b.Payload))
	if len(e) < combineMin {
		copy(e[off:], b.Payload)
		return 0 // sealChunk checksums small batches whole
	}
	crc := stream.Checksum(e[8:off])
	if b.PayloadChecksumSet {
		copy(e[off:], b.Payload)
		return stream.CombineChecksum(crc, b.PayloadChecksum, len(b.Payload))
	}
	return stream.CopyChecksum(crc, e[off:], b.Payload)
}

// encodeBatchFill is encodeBatchBody for a batch of n payload bytes that
// fill writes in place (b.Payload unused; len(e) >= combineMin): it
// returns the checksum of the bytes between the base and the checksum
// fields, combined from fill's, and fill's, which stands as the supplied
// one.
func encodeBatchFill(e []byte, b stream.Batch, n int, fill func([]byte) uint32) (rest, sum uint32) {
	off := encodeBatchFields(e, b, n)
	sum = fill(e[off : off+n : off+n])
	return stream.CombineChecksum(stream.Checksum(e[8:off]), sum, n), sum
}

// encodeBatchFields writes b's fields before the payload (of n bytes) into
// e, from its count on, and returns the payload's offset in e.
func encodeBatchFields(e []byte, b stream.Batch, n int) int {
	binary.BigEndian.PutUint32(e[8:], b.Count)
	binary.BigEndian.PutUint64(e[12:], uint64(b.Timestamp))
	binary.BigEndian.PutUint32(e[20:], uint32(len(b.Properties)))
	off := 24
	if len(b.Properties) > 0 {
		for _, k := range slices.Sorted(maps.Keys(b.Properties)) {
			v := b.Properties[k]
			binary.BigEndian.PutUint32(e[off:], uint32(len(k)))
			off += 4 + copy(e[off+4:], k)
			binary.BigEndian.PutUint32(e[off:], uint32(len(v)))
			off += 4 + copy(e[off+4:], v)
		}
	}
	binary.BigEndian.PutUint32(e[off:], uint32(n))
	return off + 4
}

// bytesReader is a bounds-checked cursor over bytes from outside.
type bytesReader struct {
	b   []byte
	off int
	err error
}

var errShort = errors.New("truncated")

func (r *bytesReader) take(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.err = errShort
		return nil
	}
	p := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return p
}

func (r *bytesReader) u8() byte {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *bytesReader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *bytesReader) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// decodeBatch decodes one batch from the front of b and returns the number
// of bytes it used.
func decodeBatch(b []byte) (stream.Batch, int, error) {
	r := &bytesReader{b: b}
	var bt stream.Batch
	bt.BaseOffset = int64(r.u64())
	bt.Count = r.u32()
	bt.Timestamp = int64(r.u64())
	np := r.u32()
	if r.err == nil && uint64(np)*8 > uint64(len(b)) {
		return bt, 0, corruptf("batch: %d properties in %d bytes", np, len(b))
	}
	if np > 0 {
		bt.Properties = make(map[string]string, np)
	}
	for i := uint32(0); i < np && r.err == nil; i++ {
		k := string(r.take(uint64(r.u32())))
		v := string(r.take(uint64(r.u32())))
		bt.Properties[k] = v
	}
	bt.Payload = r.take(uint64(r.u32()))
	if r.err != nil {
		return bt, 0, corruptf("batch: %v", r.err)
	}
	sum := stream.Checksum(b[:r.off])
	if stored := r.u32(); r.err != nil || stored != sum {
		return bt, 0, corruptf("batch at offset %d: checksum %08x, stored %08x (%v)", bt.BaseOffset, sum, stored, r.err)
	}
	if bt.Count == 0 || bt.BaseOffset < 0 || len(bt.Properties) != int(np) {
		return bt, 0, corruptf("batch at offset %d: count %d, %d properties (%d distinct)", bt.BaseOffset, bt.Count, np, len(bt.Properties))
	}
	if bt.Payload == nil {
		bt.Payload = []byte{}
	}
	return bt, r.off, nil
}

// ---- manifests ----

const (
	manCreate = 1
	manOpen   = 2
	manTrim   = 3
	manDelete = 4
)

// indexEntry names one valid chunk of the chain.
type indexEntry struct {
	Seq   uint64
	Base  int64
	Count uint64
	PutID putID
}

func (e indexEntry) end() int64 { return e.Base + int64(e.Count) }

const indexEntryLen = 8 + 8 + 8 + 16

// pageRef names an index page: an immutable object holding a run of
// index entries, written once and named by every later manifest that still
// needs it, so that a manifest's size grows with the number of pages and
// not of chunks (docs/engine.md, "Index pages").
type pageRef struct {
	ID    putID  // the page's own id (its key is layout.page(First, ID))
	First uint64 // slot of its first entry
	End   uint64 // one past the slot of its last entry
	Base  int64  // base offset of its first entry
	Next  int64  // end offset of its last entry
	N     uint32 // number of entries
}

const pageRefLen = 16 + 8 + 8 + 8 + 8 + 4

// manifest is one version of a stream incarnation's metadata.
type manifest struct {
	Kind  byte
	Owner sessionKey // the session that wrote it; Owner.Session == its version for opens
	PutID putID
	Start int64
	// The chain as known up to slot IdxEnd-1: walks continue at IdxEnd
	// with next offset IdxNext and running session IdxSess (R7).
	IdxEnd  uint64
	IdxNext int64
	IdxSess sessionKey
	// The valid chunks below IdxEnd that overlap Start: the entries of
	// Pages (those of the first page that end at or below Start aside),
	// then Index.
	Pages []pageRef
	Index []indexEntry
}

// Manifest encodings: version 1 has no pages (and is what a manifest
// without pages is still written as); version 2 adds them.
const manifestPagesVersion = 2

const manifestFixedLen = 2 + 1 + 1 + 16 + 16 + 8 + 8 + 8 + 16 + 4 + 4

func encodeManifest(m *manifest, seed uint32) []byte {
	b := make([]byte, 0, manifestFixedLen+4+len(m.Pages)*pageRefLen+len(m.Index)*indexEntryLen)
	ver := byte(codecVersion)
	if len(m.Pages) > 0 {
		ver = manifestPagesVersion
	}
	b = append(b, magicManifest[0], magicManifest[1], ver|boundFlag, m.Kind)
	b = binary.BigEndian.AppendUint64(b, m.Owner.Epoch)
	b = binary.BigEndian.AppendUint64(b, m.Owner.Session)
	b = append(b, m.PutID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Start))
	b = binary.BigEndian.AppendUint64(b, m.IdxEnd)
	b = binary.BigEndian.AppendUint64(b, uint64(m.IdxNext))
	b = binary.BigEndian.AppendUint64(b, m.IdxSess.Epoch)
	b = binary.BigEndian.AppendUint64(b, m.IdxSess.Session)
	if ver == manifestPagesVersion {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.Pages)))
		for _, p := range m.Pages {
			b = append(b, p.ID[:]...)
			b = binary.BigEndian.AppendUint64(b, p.First)
			b = binary.BigEndian.AppendUint64(b, p.End)
			b = binary.BigEndian.AppendUint64(b, uint64(p.Base))
			b = binary.BigEndian.AppendUint64(b, uint64(p.Next))
			b = binary.BigEndian.AppendUint32(b, p.N)
		}
	}
	b = appendEntries(b, m.Index)
	return binary.BigEndian.AppendUint32(b, stream.Checksum(b)^seed)
}

// appendEntries appends a count and the entries.
func appendEntries(b []byte, es []indexEntry) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(es)))
	for _, e := range es {
		b = binary.BigEndian.AppendUint64(b, e.Seq)
		b = binary.BigEndian.AppendUint64(b, uint64(e.Base))
		b = binary.BigEndian.AppendUint64(b, e.Count)
		b = append(b, e.PutID[:]...)
	}
	return b
}

// readEntries reads what appendEntries wrote (all of r's remaining bytes)
// and checks that the entries are in slot order below seqEnd, contiguous
// in offsets from next (-1: any start), each valid. It returns the end
// offset of the last entry (next when there is none).
func readEntries(r *bytesReader, what string, seqFrom, seqEnd uint64, next int64) ([]indexEntry, int64, error) {
	n := r.u32()
	if r.err != nil || uint64(n)*indexEntryLen != uint64(len(r.b)-r.off) {
		return nil, 0, corruptf("%s: %d index entries in %d bytes", what, n, len(r.b)-r.off)
	}
	es := make([]indexEntry, n)
	for i := range es {
		e := &es[i]
		e.Seq, e.Base, e.Count = r.u64(), int64(r.u64()), r.u64()
		copy(e.PutID[:], r.take(16))
		if e.Count == 0 || e.Base < 0 || e.Count > 1<<62 || e.Base > 1<<62 || (next >= 0 && e.Base != next) ||
			e.Seq < seqFrom || (i > 0 && e.Seq <= es[i-1].Seq) || e.Seq >= seqEnd {
			return nil, 0, corruptf("%s: index entry %d (seq %d, base %d, count %d) out of order", what, i, e.Seq, e.Base, e.Count)
		}
		next = e.end()
	}
	return es, next, nil
}

func decodeManifest(b []byte, seed uint32) (*manifest, error) {
	r, err := checkedBody(b, "manifest", manifestFixedLen, seed)
	if err != nil {
		return nil, err
	}
	if r.u8() != magicManifest[0] || r.u8() != magicManifest[1] {
		return nil, corruptf("manifest: bad magic")
	}
	ver := r.u8() &^ boundFlag
	if ver != codecVersion && ver != manifestPagesVersion {
		return nil, corruptf("manifest: unknown version %d", ver)
	}
	m := &manifest{Kind: r.u8()}
	m.Owner.Epoch, m.Owner.Session = r.u64(), r.u64()
	copy(m.PutID[:], r.take(16))
	m.Start = int64(r.u64())
	m.IdxEnd = r.u64()
	m.IdxNext = int64(r.u64())
	m.IdxSess.Epoch, m.IdxSess.Session = r.u64(), r.u64()
	next, seq := int64(-1), uint64(0)
	if ver == manifestPagesVersion {
		n := r.u32()
		if r.err != nil || n == 0 || uint64(n)*pageRefLen > uint64(len(r.b)-r.off) {
			return nil, corruptf("manifest: %d index pages in %d bytes", n, len(r.b)-r.off)
		}
		m.Pages = make([]pageRef, n)
		for i := range m.Pages {
			p := &m.Pages[i]
			copy(p.ID[:], r.take(16))
			p.First, p.End, p.Base, p.Next, p.N = r.u64(), r.u64(), int64(r.u64()), int64(r.u64()), r.u32()
			if p.N == 0 || p.First < seq || p.End <= p.First || p.End-p.First < uint64(p.N) || p.End > m.IdxEnd ||
				p.Base < 0 || p.Next <= p.Base || p.Next > 1<<62 || (next >= 0 && p.Base != next) {
				return nil, corruptf("manifest: index page %d (slots %d-%d, offsets %d-%d) out of order", i, p.First, p.End, p.Base, p.Next)
			}
			next, seq = p.Next, p.End
		}
		if m.Pages[0].Next <= m.Start {
			return nil, corruptf("manifest: index page 0 ends at %d, below the start %d", m.Pages[0].Next, m.Start)
		}
	}
	m.Index, next, err = readEntries(r, "manifest", seq, m.IdxEnd, next)
	if err != nil {
		return nil, err
	}
	switch {
	case r.err != nil:
		return nil, corruptf("manifest: %v", r.err)
	case m.Kind < manCreate || m.Kind > manDelete:
		return nil, corruptf("manifest: unknown kind %d", m.Kind)
	case m.Start < 0 || m.IdxNext < 0 || m.Start > m.IdxNext || m.IdxNext > 1<<62:
		return nil, corruptf("manifest: start %d, next %d out of range", m.Start, m.IdxNext)
	case next >= 0 && next != m.IdxNext:
		return nil, corruptf("manifest: index ends at %d, next is %d", next, m.IdxNext)
	}
	return m, nil
}

// checkedBody checks that b (an object named what, its version byte at
// b[2]) has at least minLen bytes and ends with the CRC32C of the rest
// (bound by seed, boundFlag), and returns a reader of the rest.
func checkedBody(b []byte, what string, minLen int, seed uint32) (*bytesReader, error) {
	if len(b) < minLen || len(b) < 7 {
		return nil, corruptf("%s: %d bytes", what, len(b))
	}
	if got, want := stream.Checksum(b[:len(b)-4])^seedFor(b[2], seed), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, corruptf("%s: checksum %08x, stored %08x (another stream's or incarnation's object?)", what, got, want)
	}
	return &bytesReader{b: b[:len(b)-4]}, nil
}

// encodePage is the index page p of entries es.
func encodePage(p pageRef, es []indexEntry, seed uint32) []byte {
	b := make([]byte, 0, 2+1+16+4+len(es)*indexEntryLen+4)
	b = append(b, magicPage[0], magicPage[1], codecVersion|boundFlag)
	b = append(b, p.ID[:]...)
	b = appendEntries(b, es)
	return binary.BigEndian.AppendUint32(b, stream.Checksum(b)^seed)
}

// decodePage reads index page p and checks it is the page p names.
func decodePage(b []byte, p pageRef, seed uint32) ([]indexEntry, error) {
	r, err := checkedBody(b, "index page", 2+1+16+4+4, seed)
	if err != nil {
		return nil, err
	}
	if r.u8() != magicPage[0] || r.u8() != magicPage[1] || r.u8()&^boundFlag != codecVersion {
		return nil, corruptf("index page: bad magic or version")
	}
	if id := r.take(16); r.err != nil || putID(id) != p.ID {
		return nil, corruptf("index page: id %x, the manifest names %x", id, p.ID)
	}
	es, next, err := readEntries(r, "index page", p.First, p.End, p.Base)
	switch {
	case err != nil:
		return nil, err
	case len(es) != int(p.N) || len(es) == 0:
		return nil, corruptf("index page: %d entries, the manifest names %d", len(es), p.N)
	case es[0].Seq != p.First || es[len(es)-1].Seq != p.End-1 || next != p.Next:
		return nil, corruptf("index page: slots %d-%d, offsets to %d; the manifest names %d-%d, %d",
			es[0].Seq, es[len(es)-1].Seq+1, next, p.First, p.End, p.Next)
	}
	return es, nil
}

// ---- generations and hints ----

const (
	genLive      = 1
	genTombstone = 2
)

// generation is one link of a stream's generation chain.
type generation struct {
	Kind byte
	Inc  string
}

func encodeGeneration(g generation, seed uint32) []byte {
	b := []byte{magicGen[0], magicGen[1], codecVersion | boundFlag, g.Kind}
	b = binary.BigEndian.AppendUint32(b, uint32(len(g.Inc)))
	b = append(b, g.Inc...)
	return binary.BigEndian.AppendUint32(b, stream.Checksum(b)^seed)
}

func decodeGeneration(b []byte, seed uint32) (generation, error) {
	var g generation
	r, err := checkedBody(b, "generation", 12, seed)
	if err != nil {
		return g, err
	}
	if r.u8() != magicGen[0] || r.u8() != magicGen[1] || r.u8()&^boundFlag != codecVersion {
		return g, corruptf("generation: bad magic or version")
	}
	g.Kind = r.u8()
	g.Inc = string(r.take(uint64(r.u32())))
	switch {
	case r.err != nil || r.off != len(r.b):
		return g, corruptf("generation: bad length")
	case g.Kind != genLive && g.Kind != genTombstone:
		return g, corruptf("generation: unknown kind %d", g.Kind)
	case g.Kind == genLive && !validIncID(g.Inc):
		return g, corruptf("generation: bad incarnation id %q", g.Inc)
	}
	return g, nil
}

func encodeHint(v uint64, seed uint32) []byte {
	b := []byte{magicHint[0], magicHint[1], codecVersion | boundFlag}
	b = binary.BigEndian.AppendUint64(b, v)
	return binary.BigEndian.AppendUint32(b, stream.Checksum(b)^seed)
}

func decodeHint(b []byte, seed uint32) (uint64, error) {
	if len(b) != 15 || b[0] != magicHint[0] || b[1] != magicHint[1] || b[2]&^boundFlag != codecVersion {
		return 0, corruptf("hint: bad format")
	}
	if stream.Checksum(b[:11])^seedFor(b[2], seed) != binary.BigEndian.Uint32(b[11:]) {
		return 0, corruptf("hint: bad checksum")
	}
	return binary.BigEndian.Uint64(b[3:]), nil
}
