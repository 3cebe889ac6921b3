package nfs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stratastream/strata/internal/trusted"
	"github.com/stratastream/strata/stream"
)

// A frame is one batch (or the roll marker that ends a segment):
//
//	0  magic     u32
//	4  length    u32  the whole frame
//	8  kind      u32  frameBatch or frameRoll
//	12 count     u32
//	16 offset    i64  the batch's base offset
//	24 timestamp i64
//	32 propsLen  u32
//	36 payLen    u32
//	40 payCRC    u32  CRC32C of the payload
//	44 hdrCRC    u32  CRC32C of bytes 0..44
//	48 properties (u16 key length, key, u32 value length, value)..., payload
//	.. bodyCRC   u32  CRC32C of properties and payload
const (
	frameMagic  = 0x464c5453 // "STLF"
	frameHdr    = 48
	frameBatch  = 0
	frameRoll   = 1
	framePad    = 2 // fills a direct write out to its alignment; holds no batch
	rollFrameSz = frameHdr + 4
)

var startTime = time.Now()

const tmpGrace = 10 * time.Minute

type frame struct {
	kind  uint32
	b     stream.Batch
	bytes int // the frame's length
}

func encodeFrame(kind uint32, off int64, b stream.Batch, payCRC uint32) []byte {
	p, body := appendFrameHead(make([]byte, 0, frameSize(b)), kind, off, b, payCRC)
	p = append(p, b.Payload...)
	return binary.LittleEndian.AppendUint32(p, body)
}

// frameSize is the length of b's frame.
func frameSize(b stream.Batch) int {
	n := frameHdr + len(b.Payload) + 4
	for k, v := range b.Properties {
		n += 2 + len(k) + 4 + len(v)
	}
	return n
}

// appendFrameHead appends the head of b's frame (its header and
// properties) to dst and returns it with the body checksum: the frame is
// the head, then the payload, then that checksum.
func appendFrameHead(dst []byte, kind uint32, off int64, b stream.Batch, payCRC uint32) ([]byte, uint32) {
	props := 0
	keys := make([]string, 0, len(b.Properties))
	for k, v := range b.Properties {
		props += 2 + len(k) + 4 + len(v)
		keys = append(keys, k)
	}
	slices.Sort(keys)
	n := frameHdr + props + len(b.Payload) + 4
	h := len(dst)
	p := append(dst, make([]byte, frameHdr)...)
	le := binary.LittleEndian
	hd := p[h:]
	le.PutUint32(hd[0:], frameMagic)
	le.PutUint32(hd[4:], uint32(n))
	le.PutUint32(hd[8:], kind)
	le.PutUint32(hd[12:], b.Count)
	le.PutUint64(hd[16:], uint64(off))
	le.PutUint64(hd[24:], uint64(b.Timestamp))
	le.PutUint32(hd[32:], uint32(props))
	le.PutUint32(hd[36:], uint32(len(b.Payload)))
	le.PutUint32(hd[40:], payCRC)
	le.PutUint32(hd[44:], crc32.Checksum(hd[:44], logTable))
	for _, k := range keys {
		p = le.AppendUint16(p, uint16(len(k)))
		p = append(p, k...)
		p = le.AppendUint32(p, uint32(len(b.Properties[k])))
		p = append(p, b.Properties[k]...)
	}
	return p, stream.CombineChecksum(crc32.Checksum(p[h+frameHdr:], logTable), payCRC, len(b.Payload))
}

// frameHeader checks a frame's header and returns its length, kind,
// offset and count; ok is false for anything that is not a whole header
// (zeros past the end, a torn write).
func frameHeader(h []byte) (length int, kind uint32, off int64, count uint32, ok bool) {
	le := binary.LittleEndian
	if len(h) < frameHdr || le.Uint32(h[0:]) != frameMagic || crc32.Checksum(h[:44], logTable) != le.Uint32(h[44:]) {
		return 0, 0, 0, 0, false
	}
	length = int(le.Uint32(h[4:]))
	if length != frameHdr+int(le.Uint32(h[32:]))+int(le.Uint32(h[36:]))+4 {
		return 0, 0, 0, 0, false
	}
	return length, le.Uint32(h[8:]), int64(le.Uint64(h[16:])), le.Uint32(h[12:]), true
}

// decodeFrame decodes a whole frame whose header frameHeader accepted; ok
// is false if its body does not check (a torn write).
func decodeFrame(p []byte) (frame, bool) {
	le := binary.LittleEndian
	props, payLen, payCRC := int(le.Uint32(p[32:])), int(le.Uint32(p[36:])), le.Uint32(p[40:])
	pb := p[frameHdr : frameHdr+props]
	pay := p[frameHdr+props : frameHdr+props+payLen]
	got := stream.Checksum(pay)
	if got != payCRC || stream.CombineChecksum(crc32.Checksum(pb, logTable), got, payLen) != le.Uint32(p[len(p)-4:]) {
		return frame{}, false
	}
	f := frame{kind: le.Uint32(p[8:]), bytes: len(p), b: stream.Batch{
		Count: le.Uint32(p[12:]), BaseOffset: int64(le.Uint64(p[16:])), Timestamp: int64(le.Uint64(p[24:])),
		Payload: pay,
	}}
	for len(pb) > 0 {
		if len(pb) < 2 {
			return frame{}, false
		}
		kl := int(le.Uint16(pb))
		if len(pb) < 2+kl+4 {
			return frame{}, false
		}
		k := string(pb[2 : 2+kl])
		vl := int(le.Uint32(pb[2+kl:]))
		if len(pb) < 6+kl+vl {
			return frame{}, false
		}
		if f.b.Properties == nil {
			f.b.Properties = map[string]string{}
		}
		f.b.Properties[k] = string(pb[6+kl : 6+kl+vl])
		pb = pb[6+kl+vl:]
	}
	return f, true
}

// span is one open's part of the log: offsets [first, end), in segments
// seq 0.. of open n; sealed when its seal is read (end final).
type span struct {
	n          int64
	first, end int64
	sealed     bool
	seq, pos   int64    // just past its last valid frame
	segFirst   []int64  // first offset of each segment seq (as far as scanned)
	idx        []idxEnt // sparse index, by offset (empty: not read yet)
}

type idxEnt struct {
	off      int64
	seq, pos int64
}

// logState is a stream directory as read: its opens and where each ends.
type logState struct {
	deleted   bool
	last      int64 // the last open record's n
	lastEpoch uint64
	spans     []*span // opens 1..last that hold data or may (open 0 is the create)
	start     int64   // the start offset
	end       int64   // the end of the log as read
	liveTrim  int64   // the trim record of the last open, if unsealed
}

// load reads a stream directory. Every open below the last without a seal
// is sealed (whoever sees o.<n+1> may seal open n); the last open is
// scanned to its valid end but not sealed, and what the scan found is kept
// only if no later open record exists after it (L3): a later opener may
// have sealed the last open below frames its stale session went on
// writing, which the scan could see. Then the directory is read again.
func (s *LogStore) load(dir, name string) (*logState, error) {
	for range 16 {
		st, err := s.loadOnce(dir, name)
		if !errors.Is(err, errRetry) {
			return st, err
		}
	}
	return nil, s.unavailable("read", name, errors.New("concurrent opens kept claiming the next open record"))
}

// loadHook, if set (tests), runs in loadOnce after the directory listing.
var loadHook func(dir string)

func (s *LogStore) loadOnce(dir, name string) (*logState, error) {
	ents, err := os.ReadDir(dir)
	s.stats.lists.Add(1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, s.noDir(name)
	}
	if err != nil {
		return nil, s.unavailable("read", name, err)
	}
	opens := map[int64]bool{}
	seals := map[int64]bool{}
	trims := map[int64]bool{}
	last := int64(-1)
	for _, e := range ents {
		n := e.Name()
		if len(n) < 3 || n[1] != '.' {
			continue
		}
		k, err := strconv.ParseInt(strings.SplitN(n[2:], ".", 2)[0], 10, 64)
		if err != nil {
			continue
		}
		switch n[0] {
		case 'o':
			opens[k] = true
			last = max(last, k)
		case 'z':
			seals[k] = true
		case 't':
			trims[k] = true
		}
	}
	if last < 0 {
		return nil, fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
	}
	if loadHook != nil {
		loadHook(dir)
	}
	st := &logState{last: last}
	rec, err := s.readOpen(dir, name, last)
	if err != nil {
		return nil, err
	}
	if rec.kind == recDelete {
		st.deleted = true
		return st, nil
	}
	st.lastEpoch = rec.epoch
	var prev seal // open 0: empty
	for k := int64(1); k <= last; k++ {
		if !opens[k] {
			return nil, fmt.Errorf("%w: stream %q: open record %d of %d missing", stream.ErrCorrupt, name, k, last)
		}
		sp := &span{n: k, first: prev.end}
		switch {
		case seals[k]:
			z, err := s.readSeal(dir, name, k)
			if err != nil {
				return nil, err
			}
			if z.end < prev.end || z.start < prev.start {
				return nil, fmt.Errorf("%w: stream %q: seal of open %d goes back", stream.ErrCorrupt, name, k)
			}
			sp.end, sp.sealed, sp.seq, sp.pos = z.end, true, z.seq, z.pos
			prev = z
		default:
			if err := s.scan(dir, name, sp, -1); err != nil {
				return nil, err
			}
			tr := prev.start
			if trims[k] {
				t, err := s.readTrim(dir, name, k)
				if err != nil {
					return nil, err
				}
				tr = max(tr, min(t.start, sp.end))
			}
			z := seal{end: sp.end, start: tr, seq: sp.seq, pos: sp.pos}
			if k < last {
				// o.<k+1> exists and was made before this scan: seal.
				if z, err = s.putSeal(dir, name, k, z); err != nil {
					return nil, err
				}
				sp.end, sp.sealed, sp.seq, sp.pos = z.end, true, z.seq, z.pos
			} else {
				st.liveTrim = tr
			}
			prev = z
		}
		st.spans = append(st.spans, sp)
	}
	if len(st.spans) > 0 && !st.spans[len(st.spans)-1].sealed {
		_, err := os.Lstat(filepath.Join(dir, openName(last+1)))
		s.stats.heads.Add(1)
		if err == nil {
			return nil, errRetry
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, s.unavailable("read", name, err)
		}
	}
	st.start, st.end = prev.start, prev.end
	return st, nil
}

// readRecord reads the record file of a stream directory, of fields
// 8-byte fields: ok is false if it is not there.
func (s *LogStore) readRecord(dir, name, file string, fields int) (f []uint64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	s.stats.gets.Add(1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.unavailable("read", name, err)
	}
	if f, err = decodeRecord(b, fields); err != nil {
		return nil, false, fmt.Errorf("stream %q: %s: %w", name, file, err)
	}
	return f, true, nil
}

func (s *LogStore) readOpen(dir, name string, n int64) (openRec, error) {
	f, ok, err := s.readRecord(dir, name, openName(n), 2)
	switch {
	case err != nil:
		return openRec{}, err
	case !ok:
		return openRec{}, fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
	case f[0] > recDelete:
		return openRec{}, fmt.Errorf("%w: stream %q: %s: open record of kind %d", stream.ErrCorrupt, name, openName(n), f[0])
	}
	return openRec{kind: byte(f[0]), epoch: f[1]}, nil
}

func (s *LogStore) readSeal(dir, name string, n int64) (seal, error) {
	f, ok, err := s.readRecord(dir, name, sealName(n), 4)
	switch {
	case err != nil:
		return seal{}, err
	case !ok:
		return seal{}, fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
	}
	return seal{end: int64(f[0]), start: int64(f[1]), seq: int64(f[2]), pos: int64(f[3])}, nil
}

// trimRec is a trim record t.<n>: the new start, and the keep point of
// open n: a frame boundary (keepSeq, keepPos) whose frame is at offset
// keepOff <= start. The segments before keepSeq may be gone, and the
// bytes of keepSeq before keepPos punched out (read as zeros).
type trimRec struct {
	start, keepSeq, keepPos, keepOff int64
}

func (s *LogStore) readTrim(dir, name string, n int64) (trimRec, error) {
	f, ok, err := s.readRecord(dir, name, trimName(n), 4)
	if err != nil || !ok {
		return trimRec{}, err
	}
	return trimRec{start: int64(f[0]), keepSeq: int64(f[1]), keepPos: int64(f[2]), keepOff: int64(f[3])}, nil
}

// putSeal records z as open n's seal unless another seal is there first;
// it returns the seal that holds. Open n's segments are flushed first: the
// read behind z may have seen frames their writer had not yet synced (it
// never acknowledged them), and a seal must not outlive, in a power loss,
// a frame below it.
func (s *LogStore) putSeal(dir, name string, n int64, z seal) (seal, error) {
	if err := s.syncSegments(dir, n, z.seq); err != nil {
		return seal{}, s.unavailable("seal", name, err)
	}
	err := s.writeFile(dir, sealName(n), encodeSeal(z), true)
	if errors.Is(err, fs.ErrExist) {
		return s.readSeal(dir, name, n)
	}
	if err != nil {
		return seal{}, s.unavailable("seal", name, err)
	}
	return z, nil
}

// syncSegments fdatasyncs open n's segments 0..seq that are still there
// (unless NoFsync).
func (s *LogStore) syncSegments(dir string, n, seq int64) error {
	if s.opts.NoFsync {
		return nil
	}
	for k := int64(0); k <= seq; k++ {
		f, err := os.Open(filepath.Join(dir, segName(n, k)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // trimmed away
		}
		if err != nil {
			return err
		}
		err = fdatasync(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// scan extends sp from (sp.seq, sp.pos) over the valid frames of open
// sp.n, up to offset limit (-1: to the first invalid frame), filling its
// index. It stops at the first frame that is not whole and valid, or that
// does not continue the offsets: what follows is the debris of appends
// that were never acknowledged.
func (s *LogStore) scan(dir, name string, sp *span, limit int64) error {
	if sp.end < sp.first {
		sp.end = sp.first
	}
	var hdr [frameHdr]byte
	for limit < 0 || sp.end < limit {
		f, err := os.Open(filepath.Join(dir, segName(sp.n, sp.seq)))
		if errors.Is(err, fs.ErrNotExist) {
			// Not made yet, or removed by a trim.
			if jumped, err := s.jumpToKeep(dir, name, sp); err != nil || !jumped {
				return err
			}
			continue
		}
		if err != nil {
			return s.unavailable("read", name, err)
		}
		if len(sp.segFirst) <= int(sp.seq) {
			sp.segFirst = append(sp.segFirst, sp.end)
			sp.idx = append(sp.idx, idxEnt{off: sp.end, seq: sp.seq, pos: sp.pos})
		}
		rolled, stopped := false, false
		lastIdx := sp.pos
		for limit < 0 || sp.end < limit {
			n, err := f.ReadAt(hdr[:], sp.pos)
			s.stats.gets.Add(1)
			if n < frameHdr {
				if err != nil && !errors.Is(err, io.EOF) {
					f.Close()
					return s.unavailable("read", name, err)
				}
				stopped = true
				break
			}
			length, kind, off, count, ok := frameHeader(hdr[:])
			if !ok || off != sp.end || (kind == frameBatch) != (count > 0) || kind > framePad {
				stopped = true
				break
			}
			body := make([]byte, length)
			if n, err := f.ReadAt(body, sp.pos); n < length {
				if err != nil && !errors.Is(err, io.EOF) {
					f.Close()
					return s.unavailable("read", name, err)
				}
				stopped = true
				break
			}
			s.stats.read.Add(int64(length))
			if _, ok := decodeFrame(body); !ok {
				stopped = true
				break
			}
			if sp.pos-lastIdx >= s.opts.IndexBytes {
				sp.idx = append(sp.idx, idxEnt{off: sp.end, seq: sp.seq, pos: sp.pos})
				lastIdx = sp.pos
			}
			sp.pos += int64(length)
			if kind == frameRoll {
				rolled = true
				break
			}
			sp.end += int64(count) // 0 for a pad
		}
		f.Close()
		if stopped {
			// The end of what is written, or bytes a trim punched out.
			if jumped, err := s.jumpToKeep(dir, name, sp); err != nil || !jumped {
				return err
			}
			continue
		}
		if !rolled {
			return nil
		}
		sp.seq++
		sp.pos = 0
	}
	return nil
}

// jumpToKeep moves a read of open sp.n that stopped at (sp.seq, sp.pos),
// at a missing segment or at bytes that are not a frame, to the keep
// point of the open's trim record if that lies beyond: the segments
// before it may be removed and its segment's bytes before it punched out
// (L5). The record was written before any removal or punch.
func (s *LogStore) jumpToKeep(dir, name string, sp *span) (bool, error) {
	tr, err := s.readTrim(dir, name, sp.n)
	if err != nil {
		return false, err
	}
	if tr.keepSeq < sp.seq || (tr.keepSeq == sp.seq && tr.keepPos <= sp.pos) {
		return false, nil
	}
	if tr.keepOff < sp.end {
		return false, fmt.Errorf("%w: stream %q: open %d: trim record keeps from offset %d, below %d", stream.ErrCorrupt, name, sp.n, tr.keepOff, sp.end)
	}
	for int64(len(sp.segFirst)) < tr.keepSeq {
		sp.segFirst = append(sp.segFirst, tr.keepOff)
	}
	if int64(len(sp.segFirst)) > tr.keepSeq {
		// Its segment is indexed already: index the keep point.
		sp.idx = append(sp.idx, idxEnt{off: tr.keepOff, seq: tr.keepSeq, pos: tr.keepPos})
	}
	sp.seq, sp.pos, sp.end = tr.keepSeq, tr.keepPos, tr.keepOff
	return true, nil
}

// logStream is one session on a LogStore stream.
type logStream struct {
	s     *LogStore
	name  string
	dir   string
	mode  stream.Mode
	epoch uint64

	mu     sync.Mutex
	closed bool
	st     *logState // the opens as read (read-only sessions refresh it)

	// Writer (read-write sessions): open n's segments.
	n       int64
	dirf    *os.File
	next    int64 // the next offset to assign
	start   int64
	failed  error // set once: every later append and trim fails with it
	queue   []*logAppend
	kick    chan struct{}
	done    chan struct{}
	cur     *os.File // the segment being written, nil before the first append
	own     *span
	alloc   int64
	flushed sync.WaitGroup
	stop    sync.Once
	trimMu  sync.Mutex    // held by a trim, and by shutdown
	gone    int64         // the own open's segments below this are removed (trimMu)
	spares  []spare       // removed segments kept for reuse, oldest first (ls.mu)
	spareN  int64         // names the next spare (trimMu)
	retired []*os.File    // segments rolled from in the group being written
	written chan *syncJob // the writer's groups, to the syncer
	tail    []byte        // the current segment's bytes of its last partial block (direct writes)
	wb      []byte        // the writer's buffer (wbegin)
	wlead   int           // ls.wb's first bytes that are ls.tail, not frames
}

// logAppend is an append queued for the writer: its frame is head, then
// payload (the caller's, held until the append completes, as Append
// allows), then body.
type logAppend struct {
	head    []byte
	payload []byte
	body    uint32
	// framed: the whole frame (head, payload, body checksum) in an aligned
	// buffer of its own with room after it for a pad frame (AppendFill);
	// nil when head and payload are apart.
	framed   []byte
	base     int64
	next     int64
	complete func(stream.AppendResult, error)
}

func (s *LogStore) openReader(name string) (*logStream, error) {
	dir := s.dir(name)
	st, err := s.load(dir, name)
	if err != nil {
		return nil, err
	}
	if st.deleted {
		return nil, fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
	}
	return &logStream{s: s, name: name, dir: dir, mode: stream.ModeReadOnly, st: st}, nil
}

// openWriter claims the next open record at epoch, then seals the open
// before it (read after the claim: W1's fence).
func (s *LogStore) openWriter(name string, epoch uint64) (*logStream, error) {
	dir := s.dir(name)
	st, err := s.load(dir, name)
	if err != nil {
		return nil, err
	}
	if st.deleted {
		return nil, fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
	}
	if epoch < st.lastEpoch {
		return nil, fmt.Errorf("%w: open %q at epoch %d: stream is at epoch %d", stream.ErrFenced, name, epoch, st.lastEpoch)
	}
	n := st.last + 1
	if err := s.writeFile(dir, openName(n), encodeOpen(openRec{kind: recOpen, epoch: epoch}), true); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
			return nil, errRetry
		}
		return nil, s.unavailable("open", name, err)
	}
	// Seal the open before ours: read after our claim, so it holds every
	// append that open's session acknowledged.
	if k := len(st.spans); k > 0 && !st.spans[k-1].sealed {
		sp := st.spans[k-1]
		if err := s.scan(dir, name, sp, -1); err != nil {
			return nil, err
		}
		tr, err := s.readTrim(dir, name, sp.n)
		if err != nil {
			return nil, err
		}
		z := seal{end: sp.end, start: max(st.liveTrim, min(tr.start, sp.end)), seq: sp.seq, pos: sp.pos}
		if z, err = s.putSeal(dir, name, sp.n, z); err != nil {
			return nil, err
		}
		sp.end, sp.sealed, sp.seq, sp.pos = z.end, true, z.seq, z.pos
		st.start, st.end = z.start, z.end
	}
	dirf, err := os.Open(dir)
	if err != nil {
		return nil, s.unavailable("open", name, err)
	}
	s.removeSpares(dir)
	st.last, st.lastEpoch = n, epoch
	own := &span{n: n, first: st.end, end: st.end, sealed: false}
	st.spans = append(st.spans, own)
	ls := &logStream{
		s: s, name: name, dir: dir, mode: stream.ModeReadWrite, epoch: epoch, st: st,
		n: n, dirf: dirf, next: st.end, start: st.start, own: own,
		kick: make(chan struct{}, 1), done: make(chan struct{}),
		written: make(chan *syncJob, writtenAhead),
	}
	if !s.register(ls) {
		dirf.Close()
		return nil, fmt.Errorf("%w: log store %s", stream.ErrClosed, s.root)
	}
	go ls.writer()
	go ls.syncer()
	return ls, nil
}

func (ls *logStream) Name() string  { return ls.name }
func (ls *logStream) Epoch() uint64 { return ls.epoch }

func (ls *logStream) usable() error {
	if ls.closed {
		return fmt.Errorf("%w: stream %q", stream.ErrClosed, ls.name)
	}
	return ls.s.check()
}

// Append implements stream.DriverStream: the batch's frame head is
// encoded now; the writer goroutine copies the frame, with the others
// queued meanwhile, into its write buffer, and acknowledges them after
// their fdatasync and the fence check.
//
// A supplied payload checksum is checked against the bytes, as a wrong one
// would be written as the frame's and end every later recovery scan there,
// unless ctx says this module's caller took it from them (trusted: the
// write-ahead layer, which checked each entry's copy as it cut the batch).
func (ls *logStream) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	var crc uint32
	if b.PayloadChecksumSet && trusted.Checksum(ctx) {
		crc = b.PayloadChecksum
	} else {
		crc = stream.Checksum(b.Payload)
	}
	if b.PayloadChecksumSet && b.PayloadChecksum != crc {
		return stream.FailedAppend(fmt.Errorf("%w: append to %q: the supplied payload checksum does not match the payload", stream.ErrCorrupt, ls.name))
	}
	if err := ls.s.info.CheckBatch(b); err != nil {
		return stream.FailedAppend(err)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if f := ls.appendableLocked(); f != nil {
		return f
	}
	fut, complete := stream.NewAppendFuture()
	a := &logAppend{payload: b.Payload, base: ls.next, complete: complete}
	a.head, a.body = appendFrameHead(nil, frameBatch, ls.next, b, crc)
	ls.enqueueLocked(a, b.Count)
	return fut
}

// AppendFill implements stream.Filler for a batch that a direct write
// takes as it is: fill writes the payload into the frame's own buffer,
// aligned, behind room for its head and ahead of room for the pad frame
// that ends it at an alignment, and the writer writes the frames from
// there (writeFramed) rather than copying them into its write buffer.
// Batches below LogOptions.DirectMinBytes, and a store that writes
// through the page cache, are left to the caller. fill's checksum is taken
// unread.
func (ls *logStream) AppendFill(ctx context.Context, b stream.Batch, n int, fill func([]byte) uint32) (*stream.AppendFuture, bool) {
	align := ls.s.dioAlign.Load()
	if align <= 0 || align > directBufAlign || n < ls.s.opts.DirectMinBytes || ls.s.noFramed.Load() {
		return nil, false
	}
	b.Payload, b.PayloadChecksumSet = nil, false
	if f := ls.appendable(); f != nil {
		return f, true
	}
	hl := frameSize(b) - 4
	size := hl + n + 4
	buf := alignedZeros(size+int(align)+rollFrameSz, directBufAlign)
	b.Payload = buf[hl : hl+n : hl+n]
	crc := fill(b.Payload)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if f := ls.appendableLocked(); f != nil {
		return f, true
	}
	fut, complete := stream.NewAppendFuture()
	a := &logAppend{payload: b.Payload, base: ls.next, complete: complete, framed: buf[:size]}
	a.head, a.body = appendFrameHead(buf[:0], frameBatch, ls.next, b, crc)
	binary.LittleEndian.PutUint32(buf[hl+n:], a.body)
	ls.enqueueLocked(a, b.Count)
	return fut, true
}

// appendable is appendableLocked with ls.mu taken.
func (ls *logStream) appendable() *stream.AppendFuture {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.appendableLocked()
}

// appendableLocked returns a failed future if the session takes no
// append, else nil.
func (ls *logStream) appendableLocked() *stream.AppendFuture {
	if err := ls.usable(); err != nil {
		return stream.FailedAppend(err)
	}
	if ls.mode != stream.ModeReadWrite {
		return stream.FailedAppend(fmt.Errorf("%w: append on %q: stream is open read-only", stream.ErrInvalidArgument, ls.name))
	}
	if ls.failed != nil {
		return stream.FailedAppend(ls.failed)
	}
	return nil
}

// enqueueLocked queues a, of count records, for the writer.
func (ls *logStream) enqueueLocked(a *logAppend, count uint32) {
	ls.next += int64(count)
	a.next = ls.next
	ls.queue = append(ls.queue, a)
	ls.flushed.Add(1)
	select {
	case ls.kick <- struct{}{}:
	default:
	}
}

// writer writes the queued appends of a read-write session, a group at a
// time, and hands each written group to the syncer; it writes the next
// group while the syncer waits for the last one's fdatasync.
func (ls *logStream) writer() {
	defer close(ls.written)
	for range ls.kick {
		ls.mu.Lock()
		group := ls.queue
		ls.queue = nil
		failed := ls.failed
		ls.mu.Unlock()
		if len(group) == 0 {
			continue
		}
		j := &syncJob{group: group, err: failed}
		if j.err == nil {
			j.err = ls.writeGroup(j)
			if j.err != nil {
				j.err = ls.fail(j.err)
			}
		}
		ls.mu.Lock()
		j.retired, ls.retired = ls.retired, nil
		ls.mu.Unlock()
		ls.written <- j
	}
}

// syncJob is a group the writer wrote (or failed to), on its way to the
// syncer.
type syncJob struct {
	group   []*logAppend
	err     error      // the group failed: not written, or not wholly
	touched []*os.File // the segments it wrote to
	retired []*os.File // the segments it rolled from, closed once synced
	cur     *os.File   // the segment being written after it
	end     int64      // the offset after its last frame
}

// syncer acknowledges the written groups in order: one fdatasync of the
// segments of every group written meanwhile (their writes completed
// before it began, so it covers them all), the fence check, then the
// acknowledgements. After the first failure every later group fails: no
// offset past a possible gap is acknowledged.
func (ls *logStream) syncer() {
	defer close(ls.done)
	var failed error
	for j := range ls.written {
		jobs := []*syncJob{j}
	more:
		for {
			select {
			case next, ok := <-ls.written:
				if !ok {
					break more
				}
				jobs = append(jobs, next)
			default:
				break more
			}
		}
		// The groups up to the first failed one (a failed group makes
		// every later one fail, as the writer's failure does) share one
		// sync; the rest fail.
		k := 0
		for failed == nil && k < len(jobs) && jobs[k].err == nil {
			k++
		}
		if k > 0 {
			if err := ls.syncGroups(jobs[:k]); err != nil {
				failed = ls.fail(err)
			}
		}
		for i, j := range jobs {
			if i >= k && failed == nil {
				failed = j.err
			}
			for _, f := range j.retired {
				f.Close()
			}
			for _, a := range j.group {
				if failed != nil {
					a.complete(stream.AppendResult{}, failed)
				} else {
					a.complete(stream.AppendResult{BaseOffset: a.base, NextOffset: a.next}, nil)
				}
				ls.flushed.Done()
			}
		}
	}
}

// fail records err as the session's failure unless one is recorded, and
// returns the one that stands.
func (ls *logStream) fail(err error) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.failed == nil {
		ls.failed = err
	}
	return ls.failed
}

// syncGroups makes written groups durable: one fdatasync per segment they
// wrote, then the fence check; then their frames are the log's.
func (ls *logStream) syncGroups(jobs []*syncJob) error {
	var touched []*os.File
	for _, j := range jobs {
		for _, f := range j.touched {
			if !slices.Contains(touched, f) {
				touched = append(touched, f)
			}
		}
	}
	if !ls.s.opts.NoFsync {
		for _, f := range touched {
			if err := syncSegment(f); err != nil {
				return ls.s.unavailable("append", ls.name, err)
			}
		}
	}
	last := jobs[len(jobs)-1]
	if err := ls.fenced(last.cur); err != nil {
		return err
	}
	ls.mu.Lock()
	ls.own.end = last.end
	ls.mu.Unlock()
	return nil
}

// syncSegment makes a segment's written frames durable (a variable for
// tests, which fail it).
var syncSegment = fdatasync

// writeGroup writes the frames of j's group at the end of the log, rolling
// segments as they fill; the syncer makes them durable.
func (ls *logStream) writeGroup(j *syncJob) error {
	s := ls.s
	group := j.group
	if done, err := ls.writeFramed(j); done || err != nil {
		return err
	}
	pos := ls.own.pos
	ls.wbegin(pos)
	// flush writes the gathered frames at pos; next is the offset after
	// the last one.
	flush := func(next int64) error {
		if ls.wlen() == 0 {
			return nil
		}
		n, err := ls.writeAt(pos, next)
		if err != nil {
			return err
		}
		pos += n
		ls.wbegin(pos)
		if !slices.Contains(j.touched, ls.cur) {
			j.touched = append(j.touched, ls.cur)
		}
		return nil
	}
	for _, a := range group {
		size := int64(len(a.head) + len(a.payload) + 4)
		if ls.cur == nil {
			if err := ls.newSegment(0, a.base); err != nil {
				return s.unavailable("append", ls.name, err)
			}
			pos = 0
			ls.wbegin(pos)
		} else if pos+ls.wlen()+size+rollFrameSz > s.opts.SegmentBytes && pos+ls.wlen() > 0 {
			ls.wappend(encodeFrame(frameRoll, a.base, stream.Batch{}, stream.Checksum(nil)))
			if err := flush(a.base); err != nil {
				return s.unavailable("append", ls.name, err)
			}
			if err := ls.newSegment(ls.own.seq+1, a.base); err != nil {
				return s.unavailable("append", ls.name, err)
			}
			pos = 0
			ls.wbegin(pos)
		}
		if pos+ls.wlen()-ls.lastIdxPos() >= s.opts.IndexBytes {
			if err := flush(a.base); err != nil {
				return s.unavailable("append", ls.name, err)
			}
			ls.mu.Lock()
			ls.own.idx = append(ls.own.idx, idxEnt{off: a.base, seq: ls.own.seq, pos: pos})
			ls.mu.Unlock()
		}
		ls.wappend(a.head)
		ls.wappend(a.payload)
		ls.wb = binary.LittleEndian.AppendUint32(ls.wb, a.body)
	}
	if err := flush(group[len(group)-1].next); err != nil {
		return s.unavailable("append", ls.name, err)
	}
	if cap(ls.wb) > maxWriteBuf {
		ls.wb = nil // a rare large group's buffer is not kept
	}
	s.stats.puts.Add(1)
	ls.mu.Lock()
	ls.own.pos = pos
	j.cur, j.end = ls.cur, group[len(group)-1].next
	ls.mu.Unlock()
	return nil
}

// writeFramed writes j's group from the frames' own buffers (AppendFill),
// each followed by a pad frame out to the alignment, in one direct write;
// it reports false, writing nothing, when the group is not all such
// frames, the write does not start at an alignment with nothing of its
// block before it, or it would not fit the current segment: writeGroup
// then gathers the frames as usual.
func (ls *logStream) writeFramed(j *syncJob) (bool, error) {
	align := ls.s.dioAlign.Load()
	pos := ls.own.pos
	if align <= 0 || align > directBufAlign || ls.cur == nil || pos&(align-1) != 0 || len(ls.tail) != 0 {
		return false, nil
	}
	end := pos
	for _, a := range j.group {
		if a.framed == nil {
			return false, nil
		}
		end += padded(int64(len(a.framed)), align)
	}
	if end+rollFrameSz > ls.s.opts.SegmentBytes {
		return false, nil
	}
	iov := make([][]byte, len(j.group))
	var idx []idxEnt
	last, written := ls.lastIdxPos(), int64(0)
	p := pos
	for i, a := range j.group {
		n := int64(len(a.framed))
		gap := padded(n, align) - n
		if gap > 0 {
			putPadFrame(a.framed[n:n+gap:n+gap], a.next)
		}
		if p-last >= ls.s.opts.IndexBytes {
			idx = append(idx, idxEnt{off: a.base, seq: ls.own.seq, pos: p})
			last = p
		}
		iov[i] = a.framed[: n+gap : n+gap]
		p += n + gap
		written += n
	}
	ls.grow(end)
	if err := writeDirectvAt(ls.cur, iov, pos); err != nil {
		if errors.Is(err, syscall.EINVAL) {
			// writeGroup tries again, gathering the frames (and stops
			// using O_DIRECT if that is refused too).
			if !ls.s.noFramed.Swap(true) {
				ls.s.log.Warn("the file system refused a direct write of frames from their own buffers; the log store gathers them from now on", "dir", ls.s.root, "err", err)
			}
			return false, nil
		}
		return true, ls.s.unavailable("append", ls.name, err)
	}
	ls.s.directWrites.Add(1)
	ls.s.framedWrites.Add(1)
	ls.s.stats.written.Add(written)
	ls.s.stats.puts.Add(1)
	if !slices.Contains(j.touched, ls.cur) {
		j.touched = append(j.touched, ls.cur)
	}
	ls.mu.Lock()
	ls.own.idx = append(ls.own.idx, idx...)
	ls.own.pos = end
	j.cur, j.end = ls.cur, j.group[len(j.group)-1].next
	ls.mu.Unlock()
	return true, nil
}

// padded is n rounded up to a multiple of align, leaving room for a whole
// pad frame where it is not one already.
func padded(n, align int64) int64 {
	gap := (align - n%align) % align
	if gap > 0 && gap < rollFrameSz {
		gap += align
	}
	return n + gap
}

// putPadFrame writes a pad frame filling p (len(p) >= rollFrameSz) at
// offset off.
func putPadFrame(p []byte, off int64) {
	zeros := p[frameHdr : len(p)-4]
	clear(zeros)
	_, body := appendFrameHead(p[:0], framePad, off, stream.Batch{Payload: zeros}, stream.Checksum(zeros))
	binary.LittleEndian.PutUint32(p[len(p)-4:], body)
}

// writtenAhead bounds the groups a session's writer writes ahead of the
// syncer's fdatasyncs.
const writtenAhead = 4

// The writer's buffer, reused from group to group: the frames of one
// write are gathered in ls.wb after ls.wlead bytes that hold, for a
// direct write, the current block's bytes before pos (ls.tail). Its
// memory is aligned for direct writes.
const maxWriteBuf = 16 << 20

// wbegin starts gathering a write at pos.
func (ls *logStream) wbegin(pos int64) {
	lead := 0
	if align := ls.s.dioAlign.Load(); align > 0 && int64(len(ls.tail)) == pos&(align-1) {
		lead = len(ls.tail)
	}
	ls.wb = ls.wb[:0]
	ls.wappend(ls.tail[:lead])
	ls.wlead = lead
}

// wlen is the length of the frames gathered.
func (ls *logStream) wlen() int64 { return int64(len(ls.wb) - ls.wlead) }

// wappend appends p to the write buffer, moving it to a larger aligned
// one if it must grow.
func (ls *logStream) wappend(p []byte) {
	if len(ls.wb)+len(p) > cap(ls.wb) {
		nb := alignedZeros(max(2*cap(ls.wb), len(ls.wb)+len(p), 64<<10), directBufAlign)[:len(ls.wb)]
		copy(nb, ls.wb)
		ls.wb = nb
	}
	ls.wb = append(ls.wb, p...)
}

// directBufAlign is the memory alignment of the write buffer: a page, at
// least what any file system's direct I/O asks.
const directBufAlign = 4096

// writeAt writes the gathered frames at pos of the current segment and
// returns how many bytes it took. Large writes go out with O_DIRECT where
// the file system takes it (as the driver's large puts do: their
// fdatasync then does not wait on the page cache's writeback): from the
// start of pos's block, the block's bytes before pos (ls.tail) rewritten
// as they are, then the frames, then a pad frame out to the alignment,
// which readers skip. Small writes, and all where O_DIRECT is refused, go
// through the page cache.
func (ls *logStream) writeAt(pos, next int64) (int64, error) {
	align := ls.s.dioAlign.Load()
	n := ls.wlen()
	start := pos - int64(ls.wlead)
	if align > 0 && n >= int64(ls.s.opts.DirectMinBytes) && start&(align-1) == 0 && align <= directBufAlign {
		gap := (align - (pos+n)%align) % align
		if gap > 0 && gap < rollFrameSz {
			gap += align
		}
		if gap > 0 {
			zeros := make([]byte, gap-rollFrameSz)
			ls.wappend(encodeFrame(framePad, next, stream.Batch{Payload: zeros}, stream.Checksum(zeros)))
		}
		ls.grow(start + int64(len(ls.wb)))
		err := writeDirectAt(ls.cur, ls.wb, start)
		if err == nil {
			ls.s.directWrites.Add(1)
			ls.s.stats.written.Add(n)
			ls.keepTail(ls.wb, start)
			return n + gap, nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return 0, err
		}
		if ls.s.dioAlign.Swap(0) != 0 {
			ls.s.log.Warn("the file system refused an O_DIRECT write; the log store writes through the page cache from now on", "dir", ls.s.root, "err", err)
		}
		ls.wb = ls.wb[:int64(ls.wlead)+n] // without the pad
	}
	p := ls.wb[ls.wlead:]
	ls.grow(pos + n)
	if _, err := ls.cur.WriteAt(p, pos); err != nil {
		return 0, err
	}
	ls.s.stats.written.Add(n)
	ls.keepTail(p, pos)
	return n, nil
}

// grow preallocates the current segment out to at least need bytes, a
// PreallocBytes step at a time.
func (ls *logStream) grow(need int64) {
	if need > ls.alloc {
		grow := max(ls.s.opts.PreallocBytes, need-ls.alloc)
		if preallocate(ls.cur, ls.alloc, grow) == nil {
			ls.alloc += grow
		}
	}
}

// keepTail keeps the bytes of the current segment's last partial block,
// after p was written at pos, for the next direct write to rewrite.
func (ls *logStream) keepTail(p []byte, pos int64) {
	align := ls.s.dioAlign.Load()
	if align == 0 {
		ls.tail = nil
		return
	}
	end := pos + int64(len(p))
	block := end &^ (align - 1)
	if pos <= block {
		ls.tail = append(ls.tail[:0], p[block-pos:]...)
		return
	}
	ls.tail = append(ls.tail, p...) // within the block the tail is in
}

func (ls *logStream) lastIdxPos() int64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if i := ls.own.idx; len(i) > 0 && i[len(i)-1].seq == ls.own.seq {
		return i[len(i)-1].pos
	}
	return 0
}

// newSegment makes segment seq of the session's open and makes it
// current; its name is durable before any frame in it is acknowledged.
func (ls *logStream) newSegment(seq, first int64) error {
	var alloc int64
	f := ls.takeSpare(segName(ls.n, seq))
	if f != nil {
		if fi, err := f.Stat(); err == nil {
			alloc = fi.Size()
		}
	} else {
		fd, err := unix.Openat(int(ls.dirf.Fd()), segName(ls.n, seq), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		f = os.NewFile(uintptr(fd), filepath.Join(ls.dir, segName(ls.n, seq)))
		if preallocate(f, 0, ls.s.opts.PreallocBytes) == nil {
			alloc = ls.s.opts.PreallocBytes
		}
	}
	if !ls.s.opts.NoFsync {
		err := f.Sync()
		if err == nil {
			err = ls.dirf.Sync()
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	ls.mu.Lock()
	if ls.cur != nil {
		ls.retired = append(ls.retired, ls.cur) // synced and closed by the syncer
	}
	ls.cur, ls.alloc, ls.tail = f, alloc, ls.tail[:0]
	ls.own.seq, ls.own.pos = seq, 0
	ls.own.segFirst = append(ls.own.segFirst, first)
	ls.own.idx = append(ls.own.idx, idxEnt{off: first, seq: seq, pos: 0})
	ls.mu.Unlock()
	return nil
}

// fenced is the check after every fdatasync: a later open record, or the
// stream deleted (cur, the segment being written, unlinked, or without
// one the open record gone, or its directory gone).
func (ls *logStream) fenced(cur *os.File) error {
	var st unix.Stat_t
	err := unix.Fstatat(int(ls.dirf.Fd()), openName(ls.n+1), &st, unix.AT_SYMLINK_NOFOLLOW)
	ls.s.stats.heads.Add(1)
	switch {
	case err == nil:
		return fmt.Errorf("%w: stream %q: session at epoch %d superseded by a later open", stream.ErrFenced, ls.name, ls.epoch)
	case !errors.Is(err, unix.ENOENT):
		return ls.s.unavailable("append", ls.name, err)
	}
	if cur != nil {
		if err := unix.Fstat(int(cur.Fd()), &st); err != nil {
			return ls.s.unavailable("append", ls.name, err)
		}
		if st.Nlink == 0 {
			return fmt.Errorf("%w: stream %q was deleted", stream.ErrFenced, ls.name)
		}
	} else if err := unix.Fstatat(int(ls.dirf.Fd()), openName(ls.n), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%w: stream %q was deleted", stream.ErrFenced, ls.name)
	}
	// The directory must still be where the store looks for it: a root
	// moved away or unmounted is the backend gone (what the session wrote
	// since is not acknowledged).
	var at, held unix.Stat_t
	if err := unix.Stat(ls.dir, &at); err != nil {
		return ls.s.unavailable("append", ls.name, err)
	}
	if err := unix.Fstat(int(ls.dirf.Fd()), &held); err != nil {
		return ls.s.unavailable("append", ls.name, err)
	}
	if at.Ino != held.Ino || at.Dev != held.Dev {
		return ls.s.unavailable("append", ls.name, errors.New("the stream directory was replaced"))
	}
	return nil
}

// refresh brings a read-only session's view up to date: the last open
// scanned further, and, if a later open appeared, everything read again.
// What the extension shows is kept only if no later open record exists
// after the scan (a seal made after that cannot end below it).
func (ls *logStream) refresh() error {
	st := ls.st
	if k := len(st.spans); k > 0 && !st.spans[k-1].sealed {
		sp := *st.spans[k-1]
		sp.idx = slices.Clone(sp.idx)
		sp.segFirst = slices.Clone(sp.segFirst)
		if err := ls.s.scan(ls.dir, ls.name, &sp, -1); err != nil {
			return err
		}
		tr, err := ls.s.readTrim(ls.dir, ls.name, sp.n)
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(ls.dir, openName(st.last+1))); errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Stat(filepath.Join(ls.dir, openName(st.last))); err == nil {
				*st.spans[k-1] = sp
				st.end = sp.end
				st.start = max(st.start, min(tr.start, sp.end))
				return nil
			}
		}
	}
	nst, err := ls.s.load(ls.dir, ls.name)
	if err != nil {
		return err
	}
	if nst.deleted {
		return fmt.Errorf("%w: stream %q was deleted", stream.ErrNotFound, ls.name)
	}
	nst.start = max(nst.start, nst.liveTrim)
	ls.st = nst
	return nil
}

// Fetch implements stream.DriverStream.
func (ls *logStream) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := ls.usable(); err != nil {
		return nil, err
	}
	if end < start {
		return nil, fmt.Errorf("%w: fetch %q: end %d < start %d", stream.ErrInvalidArgument, ls.name, end, start)
	}
	if maxBytes <= 0 || maxBytes > ls.s.info.MaxFetchBytes {
		maxBytes = ls.s.info.MaxFetchBytes
	}
	lo, hi := ls.bounds()
	if ls.mode == stream.ModeReadOnly && (start >= hi || start < lo) {
		if err := ls.refresh(); err != nil {
			return nil, err
		}
		lo, hi = ls.bounds()
	}
	if start < lo || start > hi {
		return nil, fmt.Errorf("%w: fetch %q at %d: stream holds [%d, %d)", stream.ErrOffsetOutOfRange, ls.name, start, lo, hi)
	}
	var out []stream.Batch
	size := 0
	for _, sp := range ls.st.spans {
		if len(out) > 0 && (size >= maxBytes) {
			break
		}
		spEnd := sp.end
		if start >= spEnd || sp.first >= end || sp.first >= hi {
			continue
		}
		bs, err := ls.readSpan(sp, max(start, sp.first), min(end, spEnd, hi), maxBytes-size, len(out) == 0)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			size += b.Size()
			start = b.EndOffset()
		}
		out = append(out, bs...)
		if len(bs) == 0 || start < min(end, spEnd, hi) {
			break // the byte budget ran out inside this span
		}
	}
	return out, nil
}

// bounds is the readable range: [start, next acknowledged).
func (ls *logStream) bounds() (int64, int64) {
	if ls.mode == stream.ModeReadWrite {
		return ls.start, ls.own.end
	}
	return ls.st.start, ls.st.end
}

// readSpan reads the batches of sp overlapping [from, to), up to budget
// bytes (at least one batch if first).
func (ls *logStream) readSpan(sp *span, from, to int64, budget int, first bool) ([]stream.Batch, error) {
	if len(sp.idx) == 0 {
		// A span sealed by another process: index it once.
		c := &span{n: sp.n, first: sp.first}
		if err := ls.s.scan(ls.dir, ls.name, c, sp.end); err != nil {
			return nil, err
		}
		if c.end < min(sp.end, to) {
			// Short of the seal: a segment trimmed away meanwhile, or a
			// frame below the seal that no longer checks, which the read
			// below reports as ErrCorrupt when it reaches it.
			if _, err := os.Stat(filepath.Join(ls.dir, segName(sp.n, c.seq))); err != nil {
				return nil, ls.missing(sp, from)
			}
		}
		if len(c.idx) == 0 {
			return nil, ls.missing(sp, from)
		}
		sp.idx, sp.segFirst = c.idx, c.segFirst
	}
	i := sort.Search(len(sp.idx), func(i int) bool { return sp.idx[i].off > from }) - 1
	if i < 0 {
		i = 0
	}
	seq, pos, off := sp.idx[i].seq, sp.idx[i].pos, sp.idx[i].off
	var out []stream.Batch
	size := 0
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	var hdr [frameHdr]byte
	// skip moves the read past what a trim removed or punched out when it
	// meets no frame at (seq, pos): to the trim record's keep point, if
	// that lies beyond and at or below from.
	skip := func() (bool, error) {
		tr, err := ls.s.readTrim(ls.dir, ls.name, sp.n)
		if err != nil {
			return false, err
		}
		if tr.keepSeq < seq || (tr.keepSeq == seq && tr.keepPos <= pos) {
			return false, nil
		}
		if from < tr.keepOff {
			return false, ls.missing(sp, from)
		}
		if tr.keepSeq != seq && f != nil {
			f.Close()
			f = nil
		}
		seq, pos, off = tr.keepSeq, tr.keepPos, tr.keepOff
		return true, nil
	}
	for off < to {
		if f == nil {
			var err error
			if f, err = os.Open(filepath.Join(ls.dir, segName(sp.n, seq))); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					if ok, err := skip(); ok || err != nil {
						if err != nil {
							return nil, err
						}
						continue
					}
					return nil, ls.missing(sp, from)
				}
				return nil, ls.s.unavailable("fetch", ls.name, err)
			}
			if readOpened != nil {
				readOpened()
			}
		}
		_, rerr := f.ReadAt(hdr[:], pos)
		length, kind, foff, count, ok := frameHeader(hdr[:])
		if rerr != nil || !ok || foff != off {
			if moved, err := skip(); moved || err != nil {
				if err != nil {
					return nil, err
				}
				continue
			}
			if rerr != nil {
				return nil, ls.corrupt(sp, off, rerr)
			}
			return nil, ls.corrupt(sp, off, errors.New("bad frame header"))
		}
		if kind == frameRoll {
			f.Close()
			f = nil
			seq, pos = seq+1, 0
			continue
		}
		if kind == framePad {
			pos += int64(length)
			continue
		}
		if off+int64(count) <= from {
			pos += int64(length)
			off += int64(count)
			continue
		}
		body := make([]byte, length)
		if _, err := f.ReadAt(body, pos); err != nil {
			return nil, ls.corrupt(sp, off, err)
		}
		ls.s.stats.gets.Add(1)
		ls.s.stats.read.Add(int64(length))
		fr, ok := decodeFrame(body)
		if !ok {
			return nil, ls.corrupt(sp, off, errors.New("frame checksum mismatch"))
		}
		if (len(out) > 0 || !first) && size+fr.b.Size() > budget {
			break
		}
		out = append(out, fr.b)
		size += fr.b.Size()
		pos += int64(length)
		off += int64(count)
		if size >= budget {
			break
		}
	}
	return out, nil
}

// readOpened, when set (by tests), runs in a read just after it opened a
// segment: a trim and the reuse of that segment may come in between.
var readOpened func()

// missing is the error of a read that found a segment gone: trimmed away
// (out of range now), or the stream deleted.
func (ls *logStream) missing(sp *span, off int64) error {
	if ls.mode == stream.ModeReadOnly {
		if err := ls.refresh(); err != nil {
			return err
		}
	}
	lo, hi := ls.bounds()
	if off < lo {
		return fmt.Errorf("%w: fetch %q at %d: stream holds [%d, %d)", stream.ErrOffsetOutOfRange, ls.name, off, lo, hi)
	}
	return fmt.Errorf("%w: fetch %q at %d: segment of open %d gone", stream.ErrUnavailable, ls.name, off, sp.n)
}

func (ls *logStream) corrupt(sp *span, off int64, err error) error {
	// A read racing a trim may find the bytes it was reading replaced: a
	// freed segment written again as a spare. Below the start now, that
	// is the offset gone, not corruption.
	if ls.mode == stream.ModeReadOnly {
		if rerr := ls.refresh(); rerr != nil {
			return rerr
		}
	}
	if lo, hi := ls.bounds(); off < lo {
		return fmt.Errorf("%w: fetch %q at %d: stream holds [%d, %d)", stream.ErrOffsetOutOfRange, ls.name, off, lo, hi)
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("segment ends early")
	}
	return fmt.Errorf("%w: stream %q: open %d at offset %d: %v", stream.ErrCorrupt, ls.name, sp.n, off, err)
}

// Trim implements stream.DriverStream: the trim record, then the fence
// check (a trim that passes it is in the start any later opener seals),
// then the segments wholly below the new start are removed.
func (ls *logStream) Trim(ctx context.Context, newStart int64) error {
	// The record and the check run without ls.mu, so that the writer's
	// appends do not wait for a trim's fsyncs; trimMu orders trims and
	// keeps the session's files open meanwhile (shutdown takes it).
	ls.trimMu.Lock()
	defer ls.trimMu.Unlock()
	k, err := ls.beginTrim(newStart)
	if err != nil || k == nil {
		return err
	}
	if err := ls.s.writeFile(ls.dir, trimName(ls.n), encodeRecord(uint64(newStart), uint64(k.seq), uint64(k.pos), uint64(k.off)), false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: stream %q was deleted", stream.ErrFenced, ls.name)
		}
		return ls.s.unavailable("trim", ls.name, err)
	}
	if err := ls.fenced(nil); err != nil {
		return err
	}
	ls.mu.Lock()
	ls.start = max(ls.start, newStart)
	own, earlier := ls.dropBelow(newStart)
	// Forget the index below the keep point: reads start at or above it.
	i := sort.Search(len(ls.own.idx), func(i int) bool { return ls.own.idx[i].off > k.off }) - 1
	if i > 0 {
		ls.own.idx = slices.Clone(ls.own.idx[i:])
	}
	ls.mu.Unlock()
	if trimFilesHook != nil {
		trimFilesHook()
	}
	// The files go without ls.mu: an unlink or a punch can take the file
	// system a hundred milliseconds (a discard on every freed extent with
	// -o discard), and the writer's appends must not wait for it. Nothing
	// reads below the new start any more, and readers of a session that
	// find a segment gone go on at the keep point (L5).
	ls.removeBelow(own, k.seq, earlier)
	ls.punch(*k)
	return nil
}

// beginTrim checks a trim to newStart and returns its keep point, or nil
// if it moves nothing (after the fence check such a trim still makes).
func (ls *logStream) beginTrim(newStart int64) (*idxEnt, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := ls.usable(); err != nil {
		return nil, err
	}
	if ls.mode != stream.ModeReadWrite {
		return nil, fmt.Errorf("%w: trim on %q: stream is open read-only", stream.ErrInvalidArgument, ls.name)
	}
	if ls.failed != nil && errors.Is(ls.failed, stream.ErrFenced) {
		return nil, ls.failed
	}
	if newStart > ls.own.end {
		// Past the acknowledged end (appends still in flight do not count).
		return nil, fmt.Errorf("%w: trim %q to %d: the log ends at %d", stream.ErrOffsetOutOfRange, ls.name, newStart, ls.own.end)
	}
	if newStart <= ls.start {
		return nil, ls.fenced(ls.cur)
	}
	k := ls.keepPoint(newStart)
	return &k, nil
}

// keepPoint is the last frame boundary of the own open's index at or
// below offset off: the segments before it, and its segment's bytes
// before it, hold only offsets below off. ls.mu is held.
func (ls *logStream) keepPoint(off int64) idxEnt {
	k := idxEnt{off: ls.own.first}
	for _, e := range ls.own.idx {
		if e.off > off {
			break
		}
		k = e
	}
	return k
}

// punch frees the disk blocks of the keep point's segment before it (the
// file keeps its size; those bytes read as zeros). Where the file system
// cannot, the bytes stay until the segment is removed. The segment is
// opened by name: the writer may close ls.cur meanwhile.
func (ls *logStream) punch(k idxEnt) {
	if k.pos == 0 || (ls.s.opts.SpareSegments > 0 && !ls.s.noSpares.Load()) {
		// With spares the segment is kept whole for reuse: the bytes
		// below the trim stay until the segment is recycled.
		return
	}
	f, err := os.OpenFile(filepath.Join(ls.dir, segName(ls.n, k.seq)), os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if punchHole(f, 0, k.pos) == nil {
		ls.s.stats.deletes.Add(1)
	}
}

// trimFilesHook, when set (by tests), runs as a trim starts on its files.
var trimFilesHook func()

// dropBelow forgets the spans of earlier opens that end at or below off
// and returns them, with the own open's span, for removeBelow. ls.mu is
// held.
func (ls *logStream) dropBelow(off int64) (own *span, earlier []*span) {
	keep := ls.st.spans[:0]
	for _, sp := range ls.st.spans {
		switch {
		case sp == ls.own:
			own = sp
		case sp.end <= off:
			earlier = append(earlier, sp)
			continue
		}
		keep = append(keep, sp)
	}
	ls.st.spans = keep
	return own, earlier
}

// removeBelow deletes the segments that hold only offsets below the trim:
// the own open's below keepSeq (never the current one), and every segment
// of the earlier opens dropBelow dropped. Called without ls.mu, with
// ls.trimMu held (which guards ls.gone).
func (ls *logStream) removeBelow(own *span, keepSeq int64, earlier []*span) {
	if own != nil {
		for ; ls.gone < keepSeq; ls.gone++ {
			if ls.recycle(segName(own.n, ls.gone)) {
				continue
			}
			if os.Remove(filepath.Join(ls.dir, segName(own.n, ls.gone))) == nil {
				ls.s.stats.deletes.Add(1)
			}
		}
	}
	if len(earlier) == 0 {
		return
	}
	ents, _ := os.ReadDir(ls.dir)
	for _, sp := range earlier {
		prefix := fmt.Sprintf("d.%020d.", sp.n)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) && os.Remove(filepath.Join(ls.dir, e.Name())) == nil {
				ls.s.stats.deletes.Add(1)
			}
		}
	}
}

// removeSpares removes the spare segments earlier sessions left (they
// are fenced now; one still taking its spare finds it gone and makes a
// new file). Not counted as deletes: recycle counted each.
func (s *LogStore) removeSpares(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "r.") {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// recycle keeps a removed segment of the own open as a spare, renamed
// r.<n>.<k>, for newSegment to reuse (LogOptions.SpareSegments), and says
// whether it did. A reused segment is overwritten in place: its blocks
// are allocated and written already, which a write into a fresh or
// preallocated (unwritten) extent is not, and the file system then has no
// extent to convert and no size to commit at each fdatasync (on ext4 a
// 7 MiB direct write and its fdatasync took 2.5 ms instead of 4.2). Its
// old frames hold offsets below the trim, which never continue the
// offsets a scan expects (L4), so they read as the end of the log, as
// the preallocated zeros did. Called with ls.trimMu held.
func (ls *logStream) recycle(seg string) bool {
	now := time.Now()
	ls.mu.Lock()
	var stale []spare
	for len(ls.spares) > 0 && now.Sub(ls.spares[0].at) > spareTTL {
		stale = append(stale, ls.spares[0])
		ls.spares = ls.spares[1:]
	}
	full := len(ls.spares) >= ls.s.opts.SpareSegments || ls.s.noSpares.Load()
	ls.mu.Unlock()
	for _, sp := range stale {
		_ = unix.Unlinkat(int(ls.dirf.Fd()), sp.name, 0)
	}
	if full {
		return false
	}
	name := spareName(ls.n, ls.spareN)
	if err := renameSpare(int(ls.dirf.Fd()), seg, name); err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
			ls.s.noSpares.Store(true) // the file system cannot: punch instead
		}
		return false
	}
	ls.spareN++
	ls.s.stats.deletes.Add(1)
	ls.mu.Lock()
	ls.spares = append(ls.spares, spare{name: name, at: now})
	ls.mu.Unlock()
	return true
}

// A spare segment, and when it was freed. Spares not reused within
// spareTTL are removed at the next trim: a WAL whose writes slowed down
// does not keep the disk its peak needed.
type spare struct {
	name string
	at   time.Time
}

var spareTTL = 30 * time.Second // a variable for tests

// renameSpare renames a freed segment to its spare name (a variable for
// tests, which stand in a file system that refuses it).
var renameSpare = renameNoReplace

// takeSpare renames a spare segment to name and opens it, or returns nil
// if there is none (or it is gone: a later open removed it).
func (ls *logStream) takeSpare(name string) *os.File {
	for {
		ls.mu.Lock()
		if len(ls.spares) == 0 {
			ls.mu.Unlock()
			return nil
		}
		spare := ls.spares[len(ls.spares)-1].name // the newest: the oldest expire first
		ls.spares = ls.spares[:len(ls.spares)-1]
		ls.mu.Unlock()
		dfd := int(ls.dirf.Fd())
		if renameNoReplace(dfd, spare, name) != nil {
			continue
		}
		fd, err := unix.Openat(dfd, name, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			_ = unix.Unlinkat(dfd, name, 0)
			continue
		}
		return os.NewFile(uintptr(fd), filepath.Join(ls.dir, name))
	}
}

// StartOffset implements stream.DriverStream.
func (ls *logStream) StartOffset() int64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.mode == stream.ModeReadOnly && !ls.closed {
		_ = ls.refresh()
	}
	lo, _ := ls.bounds()
	return lo
}

// NextOffset implements stream.DriverStream.
func (ls *logStream) NextOffset() int64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.mode == stream.ModeReadWrite {
		return ls.next
	}
	if !ls.closed {
		_ = ls.refresh()
	}
	_, hi := ls.bounds()
	return hi
}

// Close implements stream.DriverStream: it waits for the appends in
// flight.
func (ls *logStream) Close() error {
	ls.mu.Lock()
	if ls.closed {
		ls.mu.Unlock()
		return fmt.Errorf("%w: stream %q", stream.ErrClosed, ls.name)
	}
	ls.closed = true
	ls.mu.Unlock()
	if ls.mode != stream.ModeReadWrite {
		return nil
	}
	ls.flushed.Wait()
	ls.shutdown()
	ls.s.unregister(ls)
	return nil
}

// shutdown ends the writer goroutine once the queue is written and closes
// the session's files.
func (ls *logStream) shutdown() {
	ls.stop.Do(func() {
		// Under ls.mu: an Append that passed its checks has sent its
		// kick, and a later one fails them (the session or the store is
		// closed before this runs), so none sends on the closed channel.
		ls.mu.Lock()
		close(ls.kick)
		ls.mu.Unlock()
		<-ls.done
		ls.trimMu.Lock()
		defer ls.trimMu.Unlock()
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.failed == nil {
			ls.failed = fmt.Errorf("%w: stream %q", stream.ErrClosed, ls.name)
		}
		if ls.cur != nil {
			ls.cur.Close()
		}
		for _, f := range ls.retired {
			f.Close()
		}
		ls.dirf.Close()
	})
}

// alignedZeros returns n zero bytes whose address is a multiple of align.
func alignedZeros(n, align int) []byte {
	b := make([]byte, n+align)
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % uintptr(align))
	if off != 0 {
		off = align - off
	}
	return b[off : off+n : off+n]
}
