package nfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// Storage is a chunked.Storage on a directory: put-if-absent is a temp
// file, fsync, link(2) to the final name (EEXIST: taken) and an fsync of
// the directory. It takes no flock/fcntl locks and trusts no attribute
// cache: every read opens the file (close-to-open consistency) and sizes
// come from fstat of the open file. Safe for concurrent use, also from
// several processes and hosts on the same root.
//
// The block-aligned bulk of a large put (DirectMinBytes or more, from a
// suitably aligned buffer, as the engine's chunks are) is written with
// O_DIRECT where the file system allows it (Config.DirectIO): the device
// reads the bytes from the put's buffer instead of the kernel copying them
// into the page cache first. That changes where the bytes travel, not the
// protocol: the temp file is still fsynced before it is linked.
type Storage struct {
	root    string // Config.Root, cleaned
	objects string // root/objects
	tmp     string // root/tmp
	fsync   bool
	log     *slog.Logger
	// fileMode and dirMode are the modes of the files and directories it
	// creates (Config.FileMode, Config.DirMode).
	fileMode, dirMode fs.FileMode

	// dioAlign is the alignment direct writes need; 0: no direct writes
	// (Config.DirectIO off, or the file system refuses O_DIRECT).
	dioAlign     atomic.Int64
	directWrites atomic.Int64 // puts whose bulk went out with O_DIRECT

	tmpPrefix string       // "<host>-<pid>-<random>-"
	tmpSeq    atomic.Int64 // numbers this Storage's temp files
	closed    atomic.Bool

	puts, gets, heads, lists, deletes, bytesWritten, bytesRead, errs atomic.Int64
}

var _ chunked.Storage = (*Storage)(nil)
var _ chunked.StatsReporter = (*Storage)(nil)

// OpenStorage opens the Storage of a parsed config: it checks (or creates,
// with CreateRoot) the root, makes objects/ and tmp/, and removes torn temp
// files (see Config.TempMaxAge).
func OpenStorage(ctx context.Context, c Config) (*Storage, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	logger := c.logger()
	s := &Storage{
		root:     c.Root,
		objects:  filepath.Join(c.Root, objectsDir),
		tmp:      filepath.Join(c.Root, tmpDir),
		fsync:    c.fsync(),
		log:      logger.With("driver", "nfs", "root", c.Root),
		fileMode: c.FileMode.mode(),
		dirMode:  c.DirMode.mode(),
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	s.tmpPrefix = hostID() + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:]) + "-"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nfs open %s: %w: %w", s.root, stream.ErrUnavailable, err)
	}
	if c.CreateRoot {
		if err := s.mkdirAll(s.root); err != nil {
			return nil, s.unavailable("open", "", fmt.Errorf("creating root: %w", err))
		}
	}
	fi, err := os.Stat(s.root)
	switch {
	case err != nil:
		return nil, s.unavailable("open", "", fmt.Errorf("root: %w", err))
	case !fi.IsDir():
		return nil, fmt.Errorf("%w: nfs config: root: %s is not a directory", stream.ErrInvalidArgument, s.root)
	}
	for _, d := range []string{s.objects, s.tmp} {
		if err := s.mkdir(d); err != nil {
			return nil, s.unavailable("open", "", err)
		}
	}
	s.cleanTemp(c.TempMaxAge)
	if c.directIO() {
		s.probeDirect()
	}
	return s, nil
}

// DirectMinBytes is the smallest put whose bulk the Storage writes with
// O_DIRECT (Config.DirectIO); smaller ones go through the page cache.
const DirectMinBytes = 256 << 10

// probeDirect finds out, on a probe temp file, whether and with what
// alignment the file system takes O_DIRECT writes.
func (s *Storage) probeDirect() {
	f, path, err := s.createTemp()
	if err != nil {
		s.log.Warn("cannot probe for direct I/O; writing through the page cache", "err", err)
		return
	}
	align := directAlign(f)
	f.Close()
	os.Remove(path)
	if align == 0 {
		s.log.Info("the file system refuses O_DIRECT; writing through the page cache", "dir", s.tmp)
	}
	s.dioAlign.Store(int64(align))
}

// unavailable wraps err as stream.ErrUnavailable, naming the operation,
// key and root. The OS error stays matchable (errors.Is(err, syscall.ENOSPC)).
func (s *Storage) unavailable(op, key string, err error) error {
	s.errs.Add(1)
	if key == "" {
		return fmt.Errorf("nfs %s in %s: %w: %w", op, s.root, stream.ErrUnavailable, err)
	}
	return fmt.Errorf("nfs %s %q in %s: %w: %w", op, key, s.root, stream.ErrUnavailable, err)
}

// begin checks what every operation checks before touching a file.
func (s *Storage) begin(ctx context.Context, op, key string) error {
	if s.closed.Load() {
		return fmt.Errorf("nfs %s %q in %s: %w", op, key, s.root, stream.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nfs %s %q in %s: %w: %w", op, key, s.root, stream.ErrUnavailable, err)
	}
	return nil
}

// mkdir makes dir if it is missing and makes the new entry durable. Its
// parent must exist: the driver never recreates the root or objects/.
func (s *Storage) mkdir(dir string) error { return mkdirDurable(dir, s.dirMode, s.syncDir) }

// mkdirAll makes dir and its missing parents durably (mkdirAllDurable).
func (s *Storage) mkdirAll(dir string) error { return mkdirAllDurable(dir, s.dirMode, s.syncDir) }

// mkdirDurable makes dir if it is missing and, if it made it, fsyncs its
// parent (syncDir) so that the new entry survives a power loss.
func mkdirDurable(dir string, mode fs.FileMode, syncDir func(string) error) error {
	err := os.Mkdir(dir, mode)
	switch {
	case err == nil:
		return syncDir(filepath.Dir(dir))
	case errors.Is(err, fs.ErrExist):
		return nil
	default:
		return err
	}
}

// mkdirAllDurable makes dir and its missing parents, as os.MkdirAll, and
// makes each new entry durable: it fsyncs the parent of every directory
// it made, top down, so that a power loss after it returns cannot lose
// the root (and with it everything written under it later).
func mkdirAllDurable(dir string, mode fs.FileMode, syncDir func(string) error) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAllDurable(parent, mode, syncDir); err != nil {
			return err
		}
	}
	return mkdirDurable(dir, mode, syncDir)
}

// ensureParent makes the directories of a key's file below objects/. It
// asks the server with mkdir(2) (EEXIST is authoritative) rather than
// trusting a possibly cached stat of the path.
func (s *Storage) ensureParent(path string) error {
	dir := filepath.Dir(path)
	if dir == s.objects {
		return nil
	}
	err := s.mkdir(dir)
	if isAbsent(err) {
		if err := s.ensureParent(dir); err != nil {
			return err
		}
		err = s.mkdir(dir)
	}
	return err
}

// syncDirHook, when set (by tests), sees every directory syncDir fsyncs.
var syncDirHook atomic.Pointer[func(dir string)]

// syncDir fsyncs a directory so that entries made in it are durable.
func (s *Storage) syncDir(dir string) error {
	if !s.fsync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if h := syncDirHook.Load(); h != nil && err == nil {
		(*h)(dir)
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// createTemp creates a new, empty temp file of this Storage.
func (s *Storage) createTemp() (*os.File, string, error) {
	path := filepath.Join(s.tmp, s.tmpPrefix+strconv.FormatInt(s.tmpSeq.Add(1), 10)+tmpSuffix)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, s.fileMode)
	if isAbsent(err) {
		// tmp/ was removed under us: make it again (never the root: if the
		// root is gone, this fails too).
		if err = s.mkdir(s.tmp); err == nil {
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, s.fileMode)
		}
	}
	return f, path, err
}

// writeTemp writes data to a new temp file, fsyncs and closes it (checking
// Close: NFS reports write errors there) and returns its path.
func (s *Storage) writeTemp(data []byte) (string, error) {
	f, path, err := s.createTemp()
	if err != nil {
		return "", err
	}
	err = s.writeData(f, data)
	if err == nil && s.fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", err
	}
	return path, nil
}

// linkRetries bounds how often a put re-makes directories that a
// concurrent Delete pruned between its mkdir and its link.
const linkRetries = 8

// writeData writes data to the new, empty file f: the block-aligned bulk
// with O_DIRECT when data is large and aligned enough and the file system
// takes it, the rest (or all of it) through the page cache.
func (s *Storage) writeData(f *os.File, data []byte) error {
	align := int(s.dioAlign.Load())
	if align == 0 || len(data) < DirectMinBytes || uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(align) != 0 {
		_, err := f.Write(data)
		return err
	}
	bulk := len(data) &^ (align - 1)
	n, err := writeDirect(f, data[:bulk])
	switch {
	case err == nil:
		s.directWrites.Add(1)
		_, err = f.Write(data[bulk:])
	case errors.Is(err, syscall.EINVAL) && n > 0:
		// A short direct write (the disk filling up?) left an unaligned
		// rest, which O_DIRECT refuses: write the rest through the page
		// cache, after what went out directly.
		_, err = f.Write(data[n:])
	case errors.Is(err, syscall.EINVAL):
		// Refused after all (another file system mounted over the root
		// since the probe?): stop trying, and write it all again through
		// the page cache, from the start whatever the refused write left.
		if s.dioAlign.Swap(0) != 0 {
			s.log.Warn("the file system refused an O_DIRECT write; writing through the page cache from now on", "dir", s.tmp, "err", err)
		}
		_, err = f.WriteAt(data, 0)
	}
	return err
}

// PutIfAbsent implements chunked.Storage: temp file, fsync, link(2) to the
// final name (EEXIST: taken), fsync of the directory.
func (s *Storage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return s.put(ctx, "put-if-absent", key, data, true)
}

// Put implements chunked.Storage: temp file, fsync, rename(2) over the
// final name, fsync of the directory. Readers see the old or the new bytes,
// never a mix.
func (s *Storage) Put(ctx context.Context, key string, data []byte) error {
	return s.put(ctx, "put", key, data, false)
}

// put writes data to a temp file and publishes it as key: with link(2) when
// exclusive (EEXIST: stream.ErrAlreadyExists), else with rename(2).
func (s *Storage) put(ctx context.Context, op, key string, data []byte, exclusive bool) error {
	if err := validKey(key); err != nil {
		return err
	}
	if err := s.begin(ctx, op, key); err != nil {
		return err
	}
	s.puts.Add(1)
	final := filepath.Join(s.root, keyPath(key))
	tmp, err := s.writeTemp(data)
	if err != nil {
		return s.unavailable(op, key, fmt.Errorf("writing temp file: %w", err))
	}
	defer os.Remove(tmp) // after a rename it is gone: harmless
	publish := os.Rename
	if exclusive {
		publish = os.Link
	}
	for try := 0; ; try++ {
		err = publish(tmp, final)
		if !errors.Is(err, fs.ErrNotExist) || try == linkRetries {
			break
		}
		// A concurrent Delete pruned the directories (or they never existed).
		if err = s.ensureParent(final); err != nil {
			break
		}
	}
	switch {
	case err == nil:
	case exclusive && errors.Is(err, fs.ErrExist):
		// On NFS a retransmitted LINK whose first reply was lost answers
		// EEXIST although it succeeded: the final name is then our own
		// temp file's inode.
		if !s.sameFile(tmp, final) {
			return fmt.Errorf("nfs %s %q in %s: %w", op, key, s.root, stream.ErrAlreadyExists)
		}
	default:
		return s.unavailable(op, key, fmt.Errorf("publishing %s: %w", keyPath(key), err))
	}
	if err := s.syncDir(filepath.Dir(final)); err != nil {
		return s.unavailable(op, key, fmt.Errorf("fsync of the directory: %w", err))
	}
	s.bytesWritten.Add(int64(len(data)))
	return nil
}

// sameFile reports whether two paths name one inode.
func (s *Storage) sameFile(a, b string) bool {
	fa, err := os.Lstat(a)
	if err != nil {
		return false
	}
	fb, err := os.Lstat(b)
	return err == nil && os.SameFile(fa, fb)
}

// openKey opens a key's file. A "no such file" may come from an NFS
// client's cached negative lookup: it opens the parent directory (which
// revalidates it) and looks once more; a missing objects/ directory (the
// root unmounted or moved away) is ErrUnavailable, not ErrNotFound.
func (s *Storage) openKey(op, key string) (*os.File, error) {
	path := filepath.Join(s.root, keyPath(key))
	f, err := os.Open(path)
	if !isAbsent(err) {
		if err != nil {
			return nil, s.unavailable(op, key, err)
		}
		return f, nil
	}
	d, derr := os.Open(filepath.Dir(path))
	if derr == nil {
		d.Close()
		if f, err = os.Open(path); err == nil {
			return f, nil
		}
		if !isAbsent(err) {
			return nil, s.unavailable(op, key, err)
		}
	} else if _, serr := os.Stat(s.objects); serr != nil {
		// The parent is absent too: fine if objects/ is there, but a
		// missing objects/ means the root is gone.
		return nil, s.unavailable(op, key, fmt.Errorf("the store's objects directory: %w", serr))
	}
	return nil, fmt.Errorf("nfs %s %q in %s: %w", op, key, s.root, stream.ErrNotFound)
}

// isAbsent: the file, or a directory on its path, does not exist.
func isAbsent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// Get implements chunked.Storage.
func (s *Storage) Get(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("%w: nfs get %q: negative offset %d", stream.ErrInvalidArgument, key, off)
	}
	if err := s.begin(ctx, "get", key); err != nil {
		return nil, err
	}
	s.gets.Add(1)
	f, err := s.openKey("get", key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, s.unavailable("get", key, err)
	}
	n := fi.Size() - off
	if length >= 0 && length < n {
		n = length
	}
	if n <= 0 {
		return []byte{}, nil
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, s.unavailable("get", key, fmt.Errorf("reading %d bytes at %d: %w", n, off, err))
	}
	s.bytesRead.Add(int64(got))
	return buf[:got], nil
}

// Stat implements chunked.Storage. The size is fstat of the opened file, not
// a possibly cached stat of the path.
func (s *Storage) Stat(ctx context.Context, key string) (int64, error) {
	if err := validKey(key); err != nil {
		return 0, err
	}
	if err := s.begin(ctx, "stat", key); err != nil {
		return 0, err
	}
	s.heads.Add(1)
	f, err := s.openKey("stat", key)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, s.unavailable("stat", key, err)
	}
	return fi.Size(), nil
}

// Delete implements chunked.Storage. Every key is checked before any file is
// removed. Directories left empty are removed too (a put racing with that
// makes them again).
func (s *Storage) Delete(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := validKey(k); err != nil {
			return err
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := s.begin(ctx, "delete", keys[0]); err != nil {
		return err
	}
	s.deletes.Add(1)
	dirs := map[string]bool{}
	for _, k := range keys {
		path := filepath.Join(s.root, keyPath(k))
		if err := os.Remove(path); err != nil && !isAbsent(err) {
			return s.unavailable("delete", k, err)
		}
		dirs[filepath.Dir(path)] = true
	}
	if _, err := os.Stat(s.objects); err != nil {
		return s.unavailable("delete", keys[0], fmt.Errorf("the store's objects directory: %w", err))
	}
	for d := range dirs {
		if err := s.syncDir(d); err != nil && !isAbsent(err) {
			return s.unavailable("delete", keys[0], fmt.Errorf("fsync of %s: %w", d, err))
		}
	}
	for d := range dirs {
		s.pruneDirs(d)
	}
	return nil
}

// pruneDirs removes dir and its parents below objects/ while they are
// empty. rmdir(2) only removes empty directories, so a racing put loses
// nothing: its link sees ENOENT and makes the directories again.
func (s *Storage) pruneDirs(dir string) {
	for dir != s.objects && strings.HasPrefix(dir, s.objects+string(filepath.Separator)) {
		if err := syscall.Rmdir(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// List implements chunked.Storage: it walks the directories under prefix.
// Names that are no key of this driver (NFS's .nfsXXXX silly-rename files,
// stray files without the directory suffix) are skipped.
func (s *Storage) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	if err := validPrefix(prefix); err != nil {
		return nil, err
	}
	if err := s.begin(ctx, "list", prefix); err != nil {
		return nil, err
	}
	s.lists.Add(1)
	if _, err := os.Stat(s.objects); err != nil {
		return nil, s.unavailable("list", prefix, fmt.Errorf("the store's objects directory: %w", err))
	}
	dir := s.objects
	if prefix != "" {
		dir = filepath.Join(s.root, prefixDir(prefix))
	}
	var keys []string
	if err := s.walk(dir, prefix, after, &keys); err != nil {
		return nil, s.unavailable("list", prefix, err)
	}
	slices.Sort(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys, nil
}

// walk appends the keys below dir (whose keys start with prefix) that sort
// after after. It skips directories whose every key sorts at or before
// after.
func (s *Storage) walk(dir, prefix, after string, keys *[]string) error {
	d, err := os.Open(dir)
	if isAbsent(err) {
		return nil // nothing under this prefix (or pruned meanwhile)
	}
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if el, ok := strings.CutSuffix(name, dirSuffix); ok {
			sub := prefix + el + "/"
			if validKey(prefix+el) != nil || (sub <= after && !strings.HasPrefix(after, sub)) {
				continue
			}
			if err := s.walk(filepath.Join(dir, name), sub, after, keys); err != nil {
				return err
			}
			continue
		}
		key := prefix + name
		if strings.HasPrefix(name, ".nfs") || validKey(key) != nil || key <= after {
			continue
		}
		*keys = append(*keys, key)
	}
	return nil
}

// Close implements chunked.Storage. Later calls fail with stream.ErrClosed.
func (s *Storage) Close() error {
	s.closed.Store(true)
	return nil
}

// RequestStats implements chunked.StatsReporter.
func (s *Storage) RequestStats() chunked.RequestStats {
	return chunked.RequestStats{
		Puts: s.puts.Load(), Gets: s.gets.Load(), Heads: s.heads.Load(),
		Lists: s.lists.Load(), Deletes: s.deletes.Load(),
		BytesWritten: s.bytesWritten.Load(), BytesRead: s.bytesRead.Load(),
		Errors: s.errs.Load(),
	}
}

// Root is the directory the Storage keeps its files in.
func (s *Storage) Root() string { return s.root }
