// Package lazyfs is a FUSE file system for power-loss tests, in the way
// LazyFS does it for Jepsen: it keeps in memory what its clients write, and
// only what they make durable survives a simulated power cut. A file's data
// and mode become durable when the file is fsynced; a directory's entries
// (names created, linked, renamed or removed in it) when the directory is
// fsynced, never before (the strict mode: a new file, link or directory
// whose parent was not fsynced is gone after the cut, whatever was done to
// the file itself). Cut freezes the file system at an instant: every later
// operation fails with EIO and nothing more becomes durable; Restart, once
// unmounted, replaces the state by what was durable, as a reboot would.
//
// Mounting needs /dev/fuse and root (the mount is made with mount(2)
// directly; no fusermount is needed).
package lazyfs

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountTemp mounts a new FS on a temporary directory, unmounted at the end
// of the test. Without /dev/fuse or root it skips, except in the full
// tier (STRATA_FULL_TESTS set), where it fails.
func MountTemp(t testing.TB) (*FS, string) {
	t.Helper()
	need := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("STRATA_FULL_TESTS") != "" {
			t.Fatalf(format+" (STRATA_FULL_TESTS is set)", args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		need("lazyfs needs /dev/fuse: %v", err)
	}
	if os.Getuid() != 0 {
		need("lazyfs mounts with mount(2): needs root")
	}
	dir := t.TempDir()
	f := New()
	if err := f.Mount(dir); err != nil {
		need("%v", err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f, dir
}

// FS is one lazy file system. It may be mounted, cut, unmounted,
// restarted and mounted again any number of times.
type FS struct {
	mu      sync.Mutex
	root    *node
	nextIno uint64
	cut     bool
	server  *fuse.Server
	stats   Stats
}

// Stats counts what the file system saw.
type Stats struct {
	FileSyncs, DirSyncs int64 // fsyncs of files and of directories
	Cuts                int64
}

// node is a file or a directory: its live state and its durable one.
type node struct {
	ino        uint64
	dir        bool
	mode       uint32 // permission bits
	mtime      time.Time
	data       []byte           // files: live bytes
	entries    map[string]*node // directories: live entries
	durMode    uint32
	durData    []byte
	durEntries map[string]*node
}

// New returns an empty file system (its root directory is durable).
func New() *FS {
	f := &FS{nextIno: 1}
	f.root = f.newNode(true, 0o755)
	f.root.durMode = f.root.mode
	f.root.durEntries = map[string]*node{}
	return f
}

func (f *FS) newNode(dir bool, mode uint32) *node {
	f.nextIno++
	n := &node{ino: f.nextIno, dir: dir, mode: mode & 0o7777, mtime: time.Now()}
	if dir {
		n.entries = map[string]*node{}
	}
	return n
}

// Mount mounts f on dir (an existing, empty directory).
func (f *FS) Mount(dir string) error {
	f.mu.Lock()
	if f.server != nil {
		f.mu.Unlock()
		return fmt.Errorf("lazyfs: already mounted")
	}
	f.mu.Unlock()
	zero := time.Duration(0)
	root := &fnode{lfs: f, n: f.root}
	srv, err := fs.Mount(dir, root, &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMount: true,
			FsName:      "lazyfs",
			Name:        "lazyfs",
			AllowOther:  true,
		},
	})
	if err != nil {
		return fmt.Errorf("lazyfs: mount on %s: %w", dir, err)
	}
	f.mu.Lock()
	f.server = srv
	f.mu.Unlock()
	return nil
}

// Unmount unmounts f and waits for its server to stop.
func (f *FS) Unmount() error {
	f.mu.Lock()
	srv := f.server
	f.server = nil
	f.mu.Unlock()
	if srv == nil {
		return nil
	}
	var err error
	for try := 0; try < 50; try++ {
		if err = srv.Unmount(); err == nil {
			srv.Wait()
			return nil
		}
		time.Sleep(20 * time.Millisecond) // busy: a file still open
	}
	return fmt.Errorf("lazyfs: unmount: %w", err)
}

// Cut simulates a power cut: from now on every operation fails with EIO
// and nothing more becomes durable.
func (f *FS) Cut() {
	f.mu.Lock()
	f.cut = true
	f.stats.Cuts++
	f.mu.Unlock()
}

// Restart makes the state what was durable at the cut (or now, without
// one) and lets operations work again: files have their last fsynced
// bytes, directories their last fsynced entries, and whatever no durable
// entry reaches is gone. Call it while unmounted.
func (f *FS) Restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[*node]bool{}
	var visit func(n *node)
	visit = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		n.mode = n.durMode
		if !n.dir {
			n.data = slices.Clone(n.durData)
			return
		}
		n.entries = maps.Clone(n.durEntries)
		if n.entries == nil {
			n.entries = map[string]*node{}
		}
		for _, c := range n.entries {
			visit(c)
		}
	}
	visit(f.root)
	f.cut = false
}

// Stats returns what f counted.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// fnode is a node as the FUSE server sees it.
type fnode struct {
	fs.Inode
	lfs *FS
	n   *node
}

var (
	_ fs.NodeLookuper  = (*fnode)(nil)
	_ fs.NodeGetattrer = (*fnode)(nil)
	_ fs.NodeSetattrer = (*fnode)(nil)
	_ fs.NodeOpener    = (*fnode)(nil)
	_ fs.NodeCreater   = (*fnode)(nil)
	_ fs.NodeReader    = (*fnode)(nil)
	_ fs.NodeWriter    = (*fnode)(nil)
	_ fs.NodeFsyncer   = (*fnode)(nil)
	_ fs.NodeFlusher   = (*fnode)(nil)
	_ fs.NodeReleaser  = (*fnode)(nil)
	_ fs.NodeMkdirer   = (*fnode)(nil)
	_ fs.NodeUnlinker  = (*fnode)(nil)
	_ fs.NodeRmdirer   = (*fnode)(nil)
	_ fs.NodeRenamer   = (*fnode)(nil)
	_ fs.NodeLinker    = (*fnode)(nil)
	_ fs.NodeReaddirer = (*fnode)(nil)
	_ fs.NodeOpendirer = (*fnode)(nil)
	_ fs.NodeStatfser  = (*fnode)(nil)
)

// lock takes the file system's lock; it fails with EIO after a cut.
func (n *fnode) lock() syscall.Errno {
	n.lfs.mu.Lock()
	if n.lfs.cut {
		n.lfs.mu.Unlock()
		return syscall.EIO
	}
	return 0
}

func (n *fnode) unlock() { n.lfs.mu.Unlock() }

func typeBits(c *node) uint32 {
	if c.dir {
		return syscall.S_IFDIR
	}
	return syscall.S_IFREG
}

func fillAttr(c *node, a *fuse.Attr) {
	a.Ino = c.ino
	a.Mode = typeBits(c) | c.mode
	a.Size = uint64(len(c.data))
	a.Blocks = (a.Size + 511) / 512
	a.Nlink = 1
	if c.dir {
		a.Nlink = 2
	}
	a.Uid, a.Gid = uint32(os.Getuid()), uint32(os.Getgid())
	a.SetTimes(&c.mtime, &c.mtime, &c.mtime)
}

// child returns the FUSE inode of c, found or made under n. Call it with
// the lock held: it fills out's attributes, then unlocks.
func (n *fnode) child(ctx context.Context, c *node, out *fuse.EntryOut) *fs.Inode {
	fillAttr(c, &out.Attr)
	st := fs.StableAttr{Mode: typeBits(c), Ino: c.ino}
	n.unlock()
	return n.NewInode(ctx, &fnode{lfs: n.lfs, n: c}, st)
}

func (n *fnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	c := n.n.entries[name]
	if c == nil {
		n.unlock()
		return nil, syscall.ENOENT
	}
	return n.child(ctx, c, out), 0
}

func (n *fnode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	fillAttr(n.n, &out.Attr)
	return 0
}

func (n *fnode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	if sz, ok := in.GetSize(); ok && !n.n.dir {
		n.n.data = resize(n.n.data, int(sz))
	}
	if m, ok := in.GetMode(); ok {
		n.n.mode = m & 0o7777
	}
	if t, ok := in.GetMTime(); ok {
		n.n.mtime = t
	}
	fillAttr(n.n, &out.Attr)
	return 0
}

func resize(b []byte, n int) []byte {
	if n <= len(b) {
		return b[:n]
	}
	return append(b, make([]byte, n-len(b))...)
}

func (n *fnode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, 0, e
	}
	defer n.unlock()
	if flags&syscall.O_TRUNC != 0 && !n.n.dir {
		n.n.data = n.n.data[:0]
	}
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (n *fnode) Opendir(ctx context.Context) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	n.unlock()
	return 0
}

func (n *fnode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, nil, 0, e
	}
	c := n.n.entries[name]
	switch {
	case c != nil && flags&syscall.O_EXCL != 0:
		n.unlock()
		return nil, nil, 0, syscall.EEXIST
	case c != nil && c.dir:
		n.unlock()
		return nil, nil, 0, syscall.EISDIR
	case c != nil:
		if flags&syscall.O_TRUNC != 0 {
			c.data = c.data[:0]
		}
	default:
		c = n.lfs.newNode(false, mode)
		n.n.entries[name] = c
		n.n.mtime = time.Now()
	}
	return n.child(ctx, c, out), nil, fuse.FOPEN_DIRECT_IO, 0
}

func (n *fnode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	if off >= int64(len(n.n.data)) {
		return fuse.ReadResultData(nil), 0
	}
	c := copy(dest, n.n.data[off:])
	return fuse.ReadResultData(dest[:c]), 0
}

func (n *fnode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return 0, e
	}
	defer n.unlock()
	if end := int(off) + len(data); end > len(n.n.data) {
		n.n.data = resize(n.n.data, end)
	}
	copy(n.n.data[off:], data)
	n.n.mtime = time.Now()
	return uint32(len(data)), 0
}

// Fsync makes a file's data and mode, or a directory's entries and mode,
// durable (FSYNC and FSYNCDIR both arrive here).
func (n *fnode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	n.n.durMode = n.n.mode
	if n.n.dir {
		n.n.durEntries = maps.Clone(n.n.entries)
		n.lfs.stats.DirSyncs++
	} else {
		n.n.durData = slices.Clone(n.n.data)
		n.lfs.stats.FileSyncs++
	}
	return 0
}

func (n *fnode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	n.unlock()
	return 0
}

func (n *fnode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno { return 0 }

func (n *fnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	if n.n.entries[name] != nil {
		n.unlock()
		return nil, syscall.EEXIST
	}
	c := n.lfs.newNode(true, mode)
	n.n.entries[name] = c
	n.n.mtime = time.Now()
	return n.child(ctx, c, out), 0
}

func (n *fnode) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, func(c *node) syscall.Errno {
		if c.dir {
			return syscall.EISDIR
		}
		return 0
	})
}

func (n *fnode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, func(c *node) syscall.Errno {
		switch {
		case !c.dir:
			return syscall.ENOTDIR
		case len(c.entries) > 0:
			return syscall.ENOTEMPTY
		}
		return 0
	})
}

// remove removes entry name if check allows it.
func (n *fnode) remove(name string, check func(c *node) syscall.Errno) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	c := n.n.entries[name]
	if c == nil {
		return syscall.ENOENT
	}
	if e := check(c); e != 0 {
		return e
	}
	delete(n.n.entries, name)
	n.n.mtime = time.Now()
	return 0
}

func (n *fnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*fnode)
	if !ok {
		return syscall.EXDEV
	}
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	c := n.n.entries[name]
	if c == nil {
		return syscall.ENOENT
	}
	if old := np.n.entries[newName]; old != nil {
		switch {
		case flags&renameNoReplace != 0:
			return syscall.EEXIST
		case old.dir != c.dir && old.dir:
			return syscall.EISDIR
		case old.dir != c.dir:
			return syscall.ENOTDIR
		case old.dir && len(old.entries) > 0:
			return syscall.ENOTEMPTY
		}
	}
	if flags&fs.RENAME_EXCHANGE != 0 {
		return syscall.EINVAL
	}
	delete(n.n.entries, name)
	np.n.entries[newName] = c
	n.n.mtime, np.n.mtime = time.Now(), time.Now()
	return 0
}

func (n *fnode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*fnode)
	if !ok {
		return nil, syscall.EXDEV
	}
	if e := n.lock(); e != 0 {
		return nil, e
	}
	if n.n.entries[name] != nil {
		n.unlock()
		return nil, syscall.EEXIST
	}
	if t.n.dir {
		n.unlock()
		return nil, syscall.EPERM
	}
	n.n.entries[name] = t.n
	n.n.mtime = time.Now()
	return n.child(ctx, t.n, out), 0
}

func (n *fnode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	names := slices.Sorted(maps.Keys(n.n.entries))
	out := make([]fuse.DirEntry, 0, len(names))
	for _, name := range names {
		c := n.n.entries[name]
		out = append(out, fuse.DirEntry{Name: name, Mode: typeBits(c), Ino: c.ino})
	}
	return fs.NewListDirStream(out), 0
}

func (n *fnode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize = 4096, 4096
	out.Blocks, out.Bfree, out.Bavail = 1<<20, 1<<19, 1<<19
	out.Files, out.Ffree = 1<<20, 1<<19
	out.NameLen = 255
	return 0
}

// renameNoReplace is renameat2's RENAME_NOREPLACE.
const renameNoReplace = 0x1
