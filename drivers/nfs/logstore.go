package nfs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/stratastream/strata/stream"
)

// LogStore keeps each stream as append-only segment files in a directory
// of its own, written in place and acknowledged after one fdatasync: a
// store for write-ahead streams (stream/wal's WAL option), where a
// put-if-absent per append (two fsyncs, the file's and its directory's)
// is the latency of every produce request. docs/streamsets.md ("WAL
// store") has the layout, the rules L1-L6 and the proof sketch; in short:
//
//   - every read-write open claims the next open record o.<n> (link(2):
//     exactly one opener gets each n) after checking that its epoch is at
//     least the epoch of o.<n-1>;
//   - the session of open n writes segments d.<n>.<seq>, frames of one
//     batch each, and acknowledges a group of appends only after their
//     fdatasync and a check that o.<n+1> does not exist (and that its
//     segment is not unlinked, which a Delete does first);
//   - whoever finds o.<n+1> (a later opener, or a reader) reads open n's
//     frames after the claim exists, and records where they end in a seal
//     z.<n> (link(2): the first seal wins). Every acknowledged append of
//     open n was written and synced before its check, so before the claim,
//     so before that read: it is below the seal. What open n writes
//     afterwards lies beyond the seal and is never read.
//
// It needs a file system on which link(2) is atomic and a new name is
// seen at once by every process (a local file system, or NFS mounted
// with lookupcache=none); the embedded default's --data directory is one.
type LogStore struct {
	root string
	opts LogOptions
	log  *slog.Logger
	// dioAlign is the alignment of direct writes; 0: none (NoFsync, or
	// the file system refuses them)
	dioAlign     atomic.Int64
	directWrites atomic.Int64 // groups written with O_DIRECT
	// noFramed: a direct write of frames from their own buffers was
	// refused (writeFramed); AppendFill leaves every batch to the caller.
	noFramed     atomic.Bool
	framedWrites atomic.Int64 // groups written from their frames' own buffers
	noSpares     atomic.Bool  // renameat2 RENAME_NOREPLACE refused: no spare segments
	info         stream.Info
	closed       atomic.Bool
	tmpSeq       atomic.Int64
	tmpTag       string
	stats        logStats

	mu       sync.Mutex
	sessions map[*logStream]struct{} // open read-write sessions
}

// LogOptions tunes a LogStore. The zero value is the default.
type LogOptions struct {
	// SegmentBytes rolls to a new segment file past this size (default
	// 64 MiB). Trims free whole segments.
	SegmentBytes int64
	// PreallocBytes is how far ahead of the write position a segment is
	// allocated (fallocate), so that an fdatasync need not commit a new
	// file size (default 1 MiB).
	PreallocBytes int64
	// IndexBytes is how far apart (at most, in bytes of a segment) the
	// frame boundaries are that a session remembers for seeks, and so
	// the granularity at which a trim punches out what it frees (default
	// 1 MiB).
	IndexBytes int64
	// SpareSegments is how many segments a session keeps, when a trim
	// frees them, to write its next segments into instead of new files
	// (default 8; negative: none, every freed segment is removed and the
	// bytes below a trim punched out at once). A spare not reused within
	// 30 s is removed at the next trim.
	SpareSegments int
	// DirectMinBytes is the smallest group written with O_DIRECT where
	// the file system takes it, and the smallest batch whose frame a
	// writer of this store may have built in place (stream.Filler; default
	// DirectMinBytes, 256 KiB).
	DirectMinBytes int
	// Logger receives the store's warnings (default: discard).
	Logger *slog.Logger
	// NoFsync skips fdatasync and fsync: acknowledged appends are then lost
	// with the host (tests and benchmarks only).
	NoFsync bool
}

// Defaults of LogOptions.
const (
	DefaultLogSegmentBytes  = 64 << 20
	DefaultLogPreallocBytes = 1 << 20
	DefaultLogIndexBytes    = 1 << 20
	DefaultLogSpareSegments = 8
)

type logStats struct {
	puts, gets, heads, lists, deletes atomic.Int64
	written, read, errs               atomic.Int64
}

// OpenLogStore opens (creating it if missing) a LogStore in dir.
func OpenLogStore(dir string, opts LogOptions) (*stream.Store, error) {
	ls, err := NewLogStore(dir, opts)
	if err != nil {
		return nil, err
	}
	return stream.NewStore(ls), nil
}

// NewLogStore is OpenLogStore's driver, for callers that wrap it.
func NewLogStore(dir string, opts LogOptions) (*LogStore, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultLogSegmentBytes
	}
	if opts.PreallocBytes <= 0 {
		opts.PreallocBytes = DefaultLogPreallocBytes
	}
	if opts.IndexBytes <= 0 {
		opts.IndexBytes = DefaultLogIndexBytes
	}
	if opts.DirectMinBytes <= 0 {
		opts.DirectMinBytes = DirectMinBytes
	}
	switch {
	case opts.SpareSegments == 0:
		opts.SpareSegments = DefaultLogSpareSegments
	case opts.SpareSegments < 0:
		opts.SpareSegments = 0
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var tag [6]byte
	_, _ = rand.Read(tag[:])
	s := &LogStore{
		root: dir, opts: opts, log: opts.Logger, tmpTag: hex.EncodeToString(tag[:]),
		info: stream.Info{
			Driver: "nfs-log", Version: "1",
			MaxBatchBytes: stream.DefaultMaxBatchBytes, MaxProperties: stream.DefaultMaxProperties,
			MaxFetchBytes: stream.DefaultMaxFetchBytes,
			ReadOnlyOpen:  true, Durable: !opts.NoFsync, SharedNamespace: true,
		},
	}
	// The root, made durably: a power loss must not take it, and every
	// stream in it, away after a create returned.
	if err := mkdirAllDurable(filepath.Join(dir, logTmpDir), 0o755, s.syncDir); err != nil {
		return nil, fmt.Errorf("%w: log store %s: %w", stream.ErrUnavailable, dir, err)
	}
	s.cleanTmp()
	if !opts.NoFsync {
		s.probeDirect()
	}
	return s, nil
}

const (
	logTmpDir   = ".tmp"
	logNameFile = "name"
)

// Info implements stream.DriverStore.
func (s *LogStore) Info() stream.Info { return s.info }

// BackendStats counts the store's file operations as requests: a written
// group of appends (one fdatasync) or a record file is a put, a segment
// read a get, a stat a head, a directory listing a list.
func (s *LogStore) BackendStats(context.Context) (stream.RequestStats, error) {
	st := &s.stats
	return stream.RequestStats{
		Puts: st.puts.Load(), Gets: st.gets.Load(), Heads: st.heads.Load(),
		Lists: st.lists.Load(), Deletes: st.deletes.Load(),
		BytesWritten: st.written.Load(), BytesRead: st.read.Load(), Errors: st.errs.Load(),
	}, nil
}

func (s *LogStore) check() error {
	if s.closed.Load() {
		return fmt.Errorf("%w: log store %s", stream.ErrClosed, s.root)
	}
	return nil
}

// dirName maps a stream name to its directory: "s-" and the name with '/'
// as '~' (a byte names never hold), or, for names too long for a file
// name, "h-" and a SHA-256 of the name (the name is then in its "name"
// file).
func dirName(name string) string {
	if len(name) <= 240 {
		return "s-" + strings.ReplaceAll(name, "/", "~")
	}
	h := sha256.Sum256([]byte(name))
	return "h-" + hex.EncodeToString(h[:])
}

func (s *LogStore) dir(name string) string { return filepath.Join(s.root, dirName(name)) }

// unavailable wraps a file system error as the contract's ErrUnavailable.
func (s *LogStore) unavailable(op, name string, err error) error {
	s.stats.errs.Add(1)
	return fmt.Errorf("%w: %s %q: %w", stream.ErrUnavailable, op, name, err)
}

// noDir is the error for a stream directory that is not there: the
// stream does not exist, unless the store's root is gone too (moved away,
// unmounted): then the backend is unavailable.
func (s *LogStore) noDir(name string) error {
	if _, err := os.Stat(filepath.Join(s.root, logTmpDir)); err != nil {
		return s.unavailable("open", name, fmt.Errorf("log store root %s: %w", s.root, err))
	}
	return fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
}

// Create implements stream.DriverStore: the directory is made under .tmp
// with its create record o.0, then renamed into place (rename(2) of a
// directory onto an existing one fails: ErrAlreadyExists).
func (s *LogStore) Create(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	for range 8 {
		err := s.create(name)
		if !errors.Is(err, errRetry) {
			return err
		}
	}
	return s.unavailable("create", name, errors.New("stream directory kept changing"))
}

var errRetry = errors.New("retry")

func (s *LogStore) create(name string) error {
	final := s.dir(name)
	if _, rec, err := s.lastOpen(final, name); err == nil {
		if rec.kind != recDelete {
			return fmt.Errorf("%w: stream %q", stream.ErrAlreadyExists, name)
		}
		if err := s.finishDelete(final); err != nil {
			return s.unavailable("create", name, err)
		}
	} else if !errors.Is(err, stream.ErrNotFound) {
		return err
	}
	tmp := filepath.Join(s.root, logTmpDir, "c-"+s.tmpTag+"-"+strconv.FormatInt(s.tmpSeq.Add(1), 10))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return s.unavailable("create", name, err)
	}
	defer os.RemoveAll(tmp)
	if err := s.writeFile(tmp, openName(0), encodeOpen(openRec{kind: recCreate}), false); err != nil {
		return s.unavailable("create", name, err)
	}
	if strings.HasPrefix(dirName(name), "h-") {
		if err := s.writeFile(tmp, logNameFile, []byte(name), false); err != nil {
			return s.unavailable("create", name, err)
		}
	}
	if err := s.syncDir(tmp); err != nil {
		return s.unavailable("create", name, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			return errRetry // exists, or is being deleted: look again
		}
		return s.unavailable("create", name, err)
	}
	s.stats.puts.Add(1)
	if err := s.syncDir(s.root); err != nil {
		return s.unavailable("create", name, err)
	}
	return nil
}

// Open implements stream.DriverStore.
func (s *LogStore) Open(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if opts.Mode == stream.ModeReadOnly {
		if opts.CreateIfMissing {
			return nil, fmt.Errorf("%w: open %q: CreateIfMissing needs a read-write open", stream.ErrInvalidArgument, name)
		}
		return s.openReader(name)
	}
	for range 16 {
		ls, err := s.openWriter(name, opts.Epoch)
		if errors.Is(err, stream.ErrNotFound) && opts.CreateIfMissing {
			if err = s.Create(ctx, name); err == nil || errors.Is(err, stream.ErrAlreadyExists) {
				continue
			}
		}
		if errors.Is(err, errRetry) {
			continue
		}
		return ls, err
	}
	return nil, s.unavailable("open", name, errors.New("concurrent opens kept claiming the next open record"))
}

// Delete implements stream.DriverStore: a delete record fences every
// session, then the segments go (before the records, so that a session
// that no longer finds the delete record finds its segment unlinked), then
// the directory.
func (s *LogStore) Delete(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	dir := s.dir(name)
	for range 16 {
		last, rec, err := s.lastOpen(dir, name)
		if err != nil {
			return err
		}
		if rec.kind == recDelete {
			if err := s.finishDelete(dir); err != nil {
				return s.unavailable("delete", name, err)
			}
			return fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
		}
		err = s.writeFile(dir, openName(last+1), encodeOpen(openRec{kind: recDelete}), true)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return s.unavailable("delete", name, err)
		}
		if err := s.finishDelete(dir); err != nil {
			return s.unavailable("delete", name, err)
		}
		s.stats.deletes.Add(1)
		return nil
	}
	return s.unavailable("delete", name, errors.New("concurrent opens kept claiming the next open record"))
}

// finishDelete removes a deleted stream's directory: segments first.
func (s *LogStore) finishDelete(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for pass := range 2 {
		for _, e := range ents {
			if (pass == 0) == strings.HasPrefix(e.Name(), "d.") {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
		if pass == 0 {
			if err := s.syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return s.syncDir(s.root)
}

// List implements stream.DriverStore.
func (s *LogStore) List(ctx context.Context, prefix string) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(s.root)
	s.stats.lists.Add(1)
	if err != nil {
		return nil, s.unavailable("list", prefix, err)
	}
	var names []string
	for _, e := range ents {
		var name string
		switch n := e.Name(); {
		case strings.HasPrefix(n, "s-"):
			name = strings.ReplaceAll(n[2:], "~", "/")
		case strings.HasPrefix(n, "h-"):
			b, err := os.ReadFile(filepath.Join(s.root, n, logNameFile))
			if err != nil {
				continue // mid-create or mid-delete
			}
			name = string(b)
		default:
			continue
		}
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		_, rec, err := s.lastOpen(filepath.Join(s.root, e.Name()), name)
		if err == nil && rec.kind != recDelete {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Close implements stream.DriverStore. Open streams fail with ErrClosed
// afterwards.
func (s *LogStore) Close() error {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return fmt.Errorf("%w: log store %s", stream.ErrClosed, s.root)
	}
	open := s.sessions
	s.sessions = nil
	s.mu.Unlock()
	for ls := range open {
		ls.shutdown()
	}
	return nil
}

func (s *LogStore) register(ls *logStream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return false
	}
	if s.sessions == nil {
		s.sessions = map[*logStream]struct{}{}
	}
	s.sessions[ls] = struct{}{}
	return true
}

func (s *LogStore) unregister(ls *logStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, ls)
}

// lastOpen reads the last open record of a stream directory.
func (s *LogStore) lastOpen(dir, name string) (int64, openRec, error) {
	ents, err := os.ReadDir(dir)
	s.stats.lists.Add(1)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, openRec{}, s.noDir(name)
	}
	if err != nil {
		return 0, openRec{}, s.unavailable("read", name, err)
	}
	last := int64(-1)
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, "o.") {
			if k, err := strconv.ParseInt(n[2:], 10, 64); err == nil {
				last = max(last, k)
			}
		}
	}
	if last < 0 {
		return 0, openRec{}, fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
	}
	rec, err := s.readOpen(dir, name, last)
	return last, rec, err
}

// probeDirect finds out, on a probe file, whether and with what alignment
// the file system takes O_DIRECT writes.
func (s *LogStore) probeDirect() {
	path := filepath.Join(s.root, logTmpDir, "p-"+s.tmpTag)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return
	}
	s.dioAlign.Store(int64(directAlign(f)))
	f.Close()
	os.Remove(path)
}

// cleanTmp removes what crashed creates left in .tmp (names of this
// process's tag are never there yet).
func (s *LogStore) cleanTmp() {
	ents, _ := os.ReadDir(filepath.Join(s.root, logTmpDir))
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.ModTime().Before(startTime.Add(-tmpGrace)) {
			os.RemoveAll(filepath.Join(s.root, logTmpDir, e.Name()))
		}
	}
}

// syncDir fsyncs a directory (unless NoFsync).
func (s *LogStore) syncDir(dir string) error {
	if s.opts.NoFsync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeFile makes dir/name hold data, durably: a temp file in dir, synced,
// then link(2) (exclusive: fs.ErrExist if name exists) or rename(2), then
// the directory synced.
func (s *LogStore) writeFile(dir, name string, data []byte, exclusive bool) error {
	tmp := filepath.Join(dir, ".t-"+s.tmpTag+"-"+strconv.FormatInt(s.tmpSeq.Add(1), 10))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && !s.opts.NoFsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if exclusive {
			err = os.Link(tmp, filepath.Join(dir, name))
		} else {
			err = os.Rename(tmp, filepath.Join(dir, name))
		}
	}
	os.Remove(tmp)
	if err != nil {
		return err
	}
	s.stats.puts.Add(1)
	s.stats.written.Add(int64(len(data)))
	return s.syncDir(dir)
}

// Records: o.<n> (open), z.<n> (seal of open n), t.<n> (trim by open n).
// Each is 8-byte fields and a CRC32C.

const (
	recCreate = 0
	recOpen   = 1
	recDelete = 2
)

type openRec struct {
	kind  byte
	epoch uint64
}

func openName(n int64) string { return fmt.Sprintf("o.%020d", n) }
func sealName(n int64) string { return fmt.Sprintf("z.%020d", n) }
func trimName(n int64) string { return fmt.Sprintf("t.%020d", n) }
func segName(n, seq int64) string {
	return fmt.Sprintf("d.%020d.%020d", n, seq)
}

// spareName names a removed segment kept for reuse by the session of
// open n (r.<n>.<k>); loads ignore it, a later open removes it.
func spareName(n, k int64) string { return fmt.Sprintf("r.%020d.%020d", n, k) }

var logTable = crc32.MakeTable(crc32.Castagnoli)

// encodeRecord makes a record file: 8-byte fields and their CRC32C.
func encodeRecord(fields ...uint64) []byte {
	b := make([]byte, 0, 8*len(fields)+4)
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint64(b, f)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, logTable))
}

// decodeRecord checks a record file of n fields and returns them.
func decodeRecord(b []byte, n int) ([]uint64, error) {
	if len(b) != 8*n+4 || crc32.Checksum(b[:8*n], logTable) != binary.LittleEndian.Uint32(b[8*n:]) {
		return nil, fmt.Errorf("%w: record of %d bytes does not check", stream.ErrCorrupt, len(b))
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out, nil
}

func encodeOpen(r openRec) []byte { return encodeRecord(uint64(r.kind), r.epoch) }

// seal: where open n's log ends (end), the start offset then (start), and
// the segment and byte position just past its last frame.
type seal struct {
	end, start int64
	seq, pos   int64
}

func encodeSeal(z seal) []byte {
	return encodeRecord(uint64(z.end), uint64(z.start), uint64(z.seq), uint64(z.pos))
}
