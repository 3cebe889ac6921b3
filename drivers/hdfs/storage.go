package hdfs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	gohdfs "github.com/colinmarc/hdfs/v2"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// Layout under Config.Root (see docs/drivers/hdfs.md). Every directory
// element of a key carries a '@' suffix, so a key never collides with the
// directory of longer keys ("a" and "a/b" are ROOT/a and ROOT/a@/b):
//
//	ROOT/P@/Q@/NAME/@object  the object of key P/Q/NAME written by
//	                         PutIfAbsent: a directory holding one closed file
//	ROOT/P@/Q@/NAME          the object of key P/Q/NAME written by Put
//	                         (hints): a plain file
//	ROOT/@tmp/ID/            a PutIfAbsent being written, published by
//	                         renaming the directory to the key's path
//	ROOT/@tmp/ID             a Put being written, renamed over the key's path
//
// '@' never occurs in a key, so none of these names can collide with one.
const (
	objectName = "@object"
	tmpName    = "@tmp"
	dirSuffix  = "@"
)

// Storage is the hdfs chunked.Storage: put-if-absent is "write and close a
// file in a fresh temp directory, then rename the directory to the key",
// which HDFS refuses atomically when the key's directory exists and is not
// empty. An unclosed file (a writer that died) is therefore never at a key:
// it stays in the temp area until it is swept.
type Storage struct {
	cfg         Config
	tmp         string
	replication int
	blockSize   int64
	pool        *clients

	stats stats

	mu      sync.Mutex
	parents map[string]bool // directories known to exist
	swept   time.Time       // last sweep of the temp area
	closed  bool
}

var (
	_ chunked.Storage       = (*Storage)(nil)
	_ chunked.StatsReporter = (*Storage)(nil)
)

// OpenStorage connects to the NameNodes of a validated cfg, creates the root
// and temp directories if missing, checks that a file can be written there
// (so that a wrong user, a read-only root or safe mode fail here with the
// cause named), and sweeps abandoned temp objects.
func OpenStorage(ctx context.Context, cfg Config) (*Storage, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pool, err := newClients(cfg)
	if err != nil {
		return nil, err
	}
	s := &Storage{
		cfg:         cfg,
		tmp:         path.Join(cfg.Root, tmpName),
		replication: cfg.Replication,
		blockSize:   cfg.BlockSize,
		pool:        pool,
		parents:     map[string]bool{},
	}
	if err := s.start(ctx); err != nil {
		pool.close()
		return nil, err
	}
	return s, nil
}

// start reads the server defaults, makes the directories and writes a
// probe file.
func (s *Storage) start(ctx context.Context) error {
	return s.do(ctx, "open", s.cfg.Root, func(c *gohdfs.Client, deadline time.Time) error {
		if s.replication == 0 || s.blockSize == 0 {
			d, err := c.ServerDefaults()
			if err != nil {
				return unavailable("get server defaults from "+strings.Join(s.cfg.NameNodes, ","), "", err)
			}
			if s.replication == 0 {
				s.replication = d.Replication
			}
			if s.blockSize == 0 {
				s.blockSize = d.BlockSize
			}
		}
		if err := c.MkdirAll(s.tmp, 0o755); err != nil {
			return unavailable("create root", s.tmp+" as user "+c.User(), err)
		}
		probe := path.Join(s.tmp, "probe-"+rand.Text())
		if err := s.writeFile(c, probe, []byte("strata probe\n"), deadline); err != nil {
			c.Remove(probe)
			return unavailable("write probe", probe+" as user "+c.User(), err)
		}
		if err := c.Remove(probe); err != nil {
			return unavailable("remove probe", probe, err)
		}
		return s.sweep(c)
	})
}

// do runs op with a client, bounded by ctx and Timeouts.Operation. The
// client is not context-aware: when ctx ends first, do returns
// stream.ErrUnavailable at once and op finishes in the background (its
// connection deadlines bound it).
func (s *Storage) do(ctx context.Context, name, key string, op func(c *gohdfs.Client, deadline time.Time) error) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: hdfs %s %s: storage closed", stream.ErrUnavailable, name, key)
	}
	if err := ctx.Err(); err != nil {
		return unavailable(name, key, err)
	}
	deadline := time.Now().Add(s.cfg.Timeouts.Operation)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	done := make(chan error, 1)
	// pick may connect (replacing a broken client): inside the deadline.
	go func() { done <- op(s.pool.pick(), deadline) }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case err := <-done:
		if errors.Is(err, stream.ErrUnavailable) {
			s.stats.errors.Add(1)
		}
		return err
	case <-ctx.Done():
		s.stats.errors.Add(1)
		return unavailable(name, key, ctx.Err())
	case <-timer.C:
		s.stats.errors.Add(1)
		return unavailable(name, key, fmt.Errorf("no answer within %v", s.cfg.Timeouts.Operation))
	}
}

// full is the HDFS path of a key: ROOT/P@/Q@/NAME.
func (s *Storage) full(key string) string {
	return strings.TrimSuffix(s.dirPath(path.Dir(key)), "/") + "/" + path.Base(key)
}

// dirPath is the HDFS directory of a key prefix without its trailing '/'
// ("" and "." are the root).
func (s *Storage) dirPath(prefix string) string {
	if prefix == "" || prefix == "." {
		return s.cfg.Root
	}
	return strings.TrimSuffix(s.cfg.Root, "/") + "/" + strings.ReplaceAll(prefix, "/", dirSuffix+"/") + dirSuffix
}

// checkKey rejects keys the layout cannot hold.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") ||
		strings.Contains(key, "//") || strings.Contains(key, "@") || path.Clean(key) != key ||
		strings.HasPrefix(key, "../") || key == ".." {
		return fmt.Errorf("%w: hdfs key %q", stream.ErrInvalidArgument, key)
	}
	return nil
}

// writeFile creates name exclusively, writes data and closes it, retrying
// the close while the NameNode waits for the block's replicas
// (ErrReplicating). A nil return means the file is complete and durable.
//
// When data spans blocks, the NameNode may refuse the next block until the
// previous one is reported (NotReplicatedYetException); the client cannot
// resume after that, so the file (a temp file of this put, never
// published) is removed and written again, with backoff, until the
// deadline, as the Java client retries addBlock.
func (s *Storage) writeFile(c *gohdfs.Client, name string, data []byte, deadline time.Time) error {
	backoff := 50 * time.Millisecond
	for {
		err := s.writeFileOnce(c, name, data, deadline)
		if !isRemote(err, notReplicatedYetException) {
			return err
		}
		s.stats.retries.Add(1)
		if time.Now().Add(backoff).After(deadline) {
			return err
		}
		if err := c.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// writeFileOnce is one try of writeFile.
func (s *Storage) writeFileOnce(c *gohdfs.Client, name string, data []byte, deadline time.Time) error {
	w, err := c.CreateFile(name, s.replication, s.blockSize, 0o644)
	if err != nil {
		return err
	}
	if err := w.SetDeadline(deadline); err != nil {
		return err
	}
	// An empty file gets no block: a block with no bytes is never reported
	// by the DataNode and the NameNode would never complete the file.
	if len(data) > 0 {
		if _, err := w.Write(data); err != nil {
			w.Close()
			return err
		}
	}
	backoff := 5 * time.Millisecond
	for {
		err := w.Close()
		if !gohdfs.IsErrReplicating(err) {
			return err
		}
		s.stats.retries.Add(1)
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("closing %s: %w (replication not complete by the deadline)", name, err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 400*time.Millisecond)
	}
}

// ensureParent makes the parent directory of the key's path exist, once per
// directory and process (a rename that finds it gone makes it again).
func (s *Storage) ensureParent(c *gohdfs.Client, full string, again bool) error {
	dir := path.Dir(full)
	s.mu.Lock()
	known := s.parents[dir]
	s.mu.Unlock()
	if known && !again {
		return nil
	}
	if err := c.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s.mu.Lock()
	s.parents[dir] = true
	s.mu.Unlock()
	return nil
}

// PutIfAbsent implements chunked.Storage: write and close
// ROOT/@tmp/ID/@object, then rename ROOT/@tmp/ID to ROOT/KEY. The rename
// fails atomically if ROOT/KEY is an object already (stream.ErrAlreadyExists).
func (s *Storage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	s.stats.puts.Add(1)
	dst := s.full(key)
	return s.do(ctx, "put-if-absent", key, func(c *gohdfs.Client, deadline time.Time) error {
		dir := path.Join(s.tmp, rand.Text())
		if err := c.Mkdir(dir, 0o755); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return unavailable("put-if-absent", key+" (temp dir "+dir+")", err)
			}
			// The temp area was removed (say, by a wipe of the root).
			if err := c.MkdirAll(dir, 0o755); err != nil {
				return unavailable("put-if-absent", key+" (temp dir "+dir+")", err)
			}
		}
		if err := s.writeFile(c, path.Join(dir, objectName), data, deadline); err != nil {
			c.RemoveAll(dir)
			return unavailable("put-if-absent", key+" (temp file "+dir+")", err)
		}
		for attempt := 0; ; attempt++ {
			if err := s.ensureParent(c, dst, attempt > 0); err != nil {
				return unavailable("put-if-absent", key+" (parent directory)", err)
			}
			err := c.Rename(dir, dst)
			switch {
			case err == nil:
				s.stats.written.Add(int64(len(data)))
				return nil
			case isTaken(err):
				c.RemoveAll(dir)
				return fmt.Errorf("%w: hdfs put-if-absent %s", stream.ErrAlreadyExists, key)
			case errors.Is(err, fs.ErrNotExist) && attempt < 3:
				// The parent went away (Delete prunes empty directories).
				s.stats.retries.Add(1)
				continue
			}
			// Unknown outcome: the rename may have happened. The temp
			// directory, if still there, is swept later.
			return unavailable("put-if-absent", key+" (rename from "+dir+")", err)
		}
	})
}

// Put implements chunked.Storage: write and close ROOT/@tmp/ID, then rename
// it over ROOT/KEY (a plain file; rename2 with overwrite replaces it
// atomically).
func (s *Storage) Put(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	s.stats.puts.Add(1)
	dst := s.full(key)
	return s.do(ctx, "put", key, func(c *gohdfs.Client, deadline time.Time) error {
		tmp := path.Join(s.tmp, rand.Text())
		err := s.writeFile(c, tmp, data, deadline)
		if errors.Is(err, fs.ErrNotExist) { // temp area removed
			if err = c.MkdirAll(s.tmp, 0o755); err == nil {
				err = s.writeFile(c, tmp, data, deadline)
			}
		}
		if err != nil {
			c.Remove(tmp)
			return unavailable("put", key+" (temp file "+tmp+")", err)
		}
		for attempt := 0; ; attempt++ {
			if err := s.ensureParent(c, dst, attempt > 0); err != nil {
				return unavailable("put", key+" (parent directory)", err)
			}
			err := c.Rename(tmp, dst)
			switch {
			case err == nil:
				s.stats.written.Add(int64(len(data)))
				return nil
			case errors.Is(err, fs.ErrNotExist) && attempt < 3:
				s.stats.retries.Add(1)
				continue
			case isTaken(err) && attempt < 3:
				// A put-if-absent object is there: remove it, then rename
				// (hints only; a reader may see the key absent meanwhile).
				s.stats.retries.Add(1)
				if err := s.removeKey(c, dst); err != nil {
					c.Remove(tmp)
					return unavailable("put", key+" (replacing a put-if-absent object)", err)
				}
				continue
			}
			return unavailable("put", key+" (rename from "+tmp+")", err)
		}
	})
}

// open opens the object at key: ROOT/KEY/@object, else the plain file
// ROOT/KEY.
func (s *Storage) open(c *gohdfs.Client, op, key string) (*gohdfs.FileReader, error) {
	dst := s.full(key)
	r, err := c.Open(path.Join(dst, objectName))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, mapErr(op, key, err)
	}
	r, err = c.Open(dst)
	if err != nil {
		return nil, mapErr(op, key, err)
	}
	if r.Stat().IsDir() {
		r.Close()
		return nil, fmt.Errorf("%w: hdfs %s %s", stream.ErrNotFound, op, key)
	}
	return r, nil
}

// Get implements chunked.Storage.
func (s *Storage) Get(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("%w: hdfs get %s: offset %d < 0", stream.ErrInvalidArgument, key, off)
	}
	s.stats.gets.Add(1)
	var out []byte
	err := s.do(ctx, "get", key, func(c *gohdfs.Client, deadline time.Time) error {
		r, err := s.open(c, "get", key)
		if err != nil {
			return err
		}
		defer r.Close()
		size := r.Stat().Size()
		if off >= size || length == 0 {
			out = []byte{}
			return nil
		}
		n := size - off
		if length > 0 && length < n {
			n = length
		}
		if err := r.SetDeadline(deadline); err != nil {
			return unavailable("get", key, err)
		}
		buf := make([]byte, n)
		if _, err := r.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return mapErr("get", key, err)
		}
		out = buf
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.stats.read.Add(int64(len(out)))
	return out, nil
}

// Stat implements chunked.Storage.
func (s *Storage) Stat(ctx context.Context, key string) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	s.stats.heads.Add(1)
	var size int64
	err := s.do(ctx, "stat", key, func(c *gohdfs.Client, _ time.Time) error {
		dst := s.full(key)
		fi, err := c.Stat(path.Join(dst, objectName))
		if errors.Is(err, fs.ErrNotExist) {
			fi, err = c.Stat(dst)
			if err == nil && fi.IsDir() {
				return fmt.Errorf("%w: hdfs stat %s", stream.ErrNotFound, key)
			}
		}
		if err != nil {
			return mapErr("stat", key, err)
		}
		size = fi.Size()
		return nil
	})
	return size, err
}

// Delete implements chunked.Storage. For each key it removes
// ROOT/KEY/@object, then ROOT/KEY only if it is a file or an empty
// directory (never a directory holding other keys), then prunes parent
// directories left empty. A put-if-absent racing with it either lands
// before (and is deleted) or after (and stays): removal is never recursive.
func (s *Storage) Delete(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return err
		}
	}
	s.stats.deletes.Add(int64(len(keys)))
	return s.do(ctx, "delete", strings.Join(keys, ","), func(c *gohdfs.Client, _ time.Time) error {
		dirs := map[string]bool{}
		for _, k := range keys {
			dst := s.full(k)
			if err := s.removeKey(c, dst); err != nil {
				return unavailable("delete", k, err)
			}
			dirs[path.Dir(dst)] = true
		}
		s.prune(c, dirs)
		return nil
	})
}

// removeKey removes the object at the key's path dst: DST/@object, then
// DST itself only if it is a file or an empty directory.
func (s *Storage) removeKey(c *gohdfs.Client, dst string) error {
	if err := c.Remove(path.Join(dst, objectName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := c.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotEmpty(err) {
		return err
	}
	return nil
}

// prune removes the given directories and their parents below the root
// while they are empty (best effort; a put that finds its parent gone
// makes it again).
func (s *Storage) prune(c *gohdfs.Client, dirs map[string]bool) {
	list := make([]string, 0, len(dirs))
	for d := range dirs {
		list = append(list, d)
	}
	// Deepest first, so a parent is tried after its children.
	slices.SortFunc(list, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	tried := map[string]bool{}
	for _, d := range list {
		for d != s.cfg.Root && strings.HasPrefix(d, strings.TrimSuffix(s.cfg.Root, "/")+"/") && !tried[d] {
			tried[d] = true
			s.mu.Lock()
			delete(s.parents, d)
			s.mu.Unlock()
			if err := c.Remove(d); err != nil {
				break // not empty, gone, or unreachable: stop here
			}
			d = path.Dir(d)
		}
	}
}

// List implements chunked.Storage. It walks the directories under prefix
// (a directory holding @object is an object, so is a plain file) and sorts
// the keys. It also sweeps abandoned temp objects, at most once per
// TempMaxAge/4.
func (s *Storage) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	if prefix != "" && (!strings.HasSuffix(prefix, "/") || checkKey(strings.TrimSuffix(prefix, "/")) != nil) {
		return nil, fmt.Errorf("%w: hdfs list: bad prefix %q", stream.ErrInvalidArgument, prefix)
	}
	s.stats.lists.Add(1)
	var keys []string
	err := s.do(ctx, "list", prefix, func(c *gohdfs.Client, _ time.Time) error {
		s.mu.Lock()
		due := time.Since(s.swept) > s.cfg.TempMaxAge/4
		s.mu.Unlock()
		if due {
			s.sweep(c) // best effort
		}
		var err error
		keys, err = s.walk(c, strings.TrimSuffix(prefix, "/"))
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	i, _ := slices.BinarySearch(keys, after)
	if i < len(keys) && keys[i] == after {
		i++
	}
	keys = keys[i:]
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys, nil
}

// walk returns the keys under the key prefix rel ("" is the root).
func (s *Storage) walk(c *gohdfs.Client, rel string) ([]string, error) {
	dir := s.dirPath(rel)
	entries, err := c.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("list", dir, err)
	}
	var keys []string
	for _, e := range entries {
		name := e.Name()
		child := func(n string) string {
			if rel == "" {
				return n
			}
			return rel + "/" + n
		}
		elem, isPrefix := strings.CutSuffix(name, dirSuffix)
		switch {
		case isPrefix && e.IsDir() && elem != "" && !strings.Contains(elem, "@"):
			sub, err := s.walk(c, child(elem))
			if err != nil {
				return nil, err
			}
			keys = append(keys, sub...)
		case strings.Contains(name, "@"):
			// The temp area, or nothing of ours.
		default:
			// An object directory, or a Put's plain file. An object
			// directory left empty by a racing Delete is listed too; its
			// Get then says ErrNotFound, as for any key deleted after List.
			keys = append(keys, child(name))
		}
	}
	return keys, nil
}

// sweep removes temp objects older than TempMaxAge: puts whose writer died
// or gave up before publishing (possibly unclosed files; HDFS lets a delete
// remove those). It never touches a published key.
func (s *Storage) sweep(c *gohdfs.Client) error {
	s.mu.Lock()
	s.swept = time.Now()
	s.mu.Unlock()
	entries, err := c.ReadDir(s.tmp)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return unavailable("sweep temp area", s.tmp, err)
	}
	for _, e := range entries {
		if time.Since(e.ModTime()) > s.cfg.TempMaxAge {
			if err := c.RemoveAll(path.Join(s.tmp, e.Name())); err != nil {
				return unavailable("sweep temp area", path.Join(s.tmp, e.Name()), err)
			}
			s.stats.swept.Add(1)
		}
	}
	return nil
}

// Close implements chunked.Storage.
func (s *Storage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.pool.close()
	return nil
}
