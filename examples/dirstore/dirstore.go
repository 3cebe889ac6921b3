// Package dirstore is the example driver of docs/writing-a-driver.md: a
// chunked.Storage on a directory, made a stream.Store by chunked.NewStore.
package dirstore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// Config is the driver's config document (YAML or JSON).
type Config struct {
	Root string `yaml:"root"` // an existing directory for the store; required
}

// ParseConfig parses a config document, refusing unknown fields.
func ParseConfig(doc []byte) (c Config, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err = dec.Decode(&c); errors.Is(err, io.EOF) || err == nil && c.Root == "" {
		err = errors.New("root is required")
	}
	if err != nil {
		return c, fmt.Errorf("%w: dirstore config: %v", stream.ErrInvalidArgument, err)
	}
	return c, nil
}

// Open is the driver's stream.Opener. Puts are fsynced and seen by every
// process on Root: the Store declares Durable and SharedNamespace.
func Open(ctx context.Context, doc []byte) (*stream.Store, error) {
	c, err := ParseConfig(doc)
	if err != nil {
		return nil, err
	}
	st, err := OpenStorage(ctx, c)
	if err != nil {
		return nil, err
	}
	return chunked.NewStore(st, chunked.Options{Driver: "dirstore", Version: "0.1.0", Durable: true, SharedNamespace: true})
}

// Storage is a chunked.Storage on a directory. Key "a/b/c" is the file
// a/b/c@ ('@', which keys never hold, keeps the file of key "a/b" apart
// from the directory of "a/b/c", and temp files apart from both).
type Storage struct{ root string }

// OpenStorage opens the Storage on c.Root, which must exist.
func OpenStorage(_ context.Context, c Config) (*Storage, error) {
	s := &Storage{root: c.Root}
	_, err := do(s, "open", "", func(*os.Root, string) (any, error) { return nil, nil })
	return s, err
}

// do runs fn on the root, opened for the call (no name escapes an
// os.Root, and a root taken away, a stopped backend, is never recreated),
// with key's file name, and maps fn's error to the stream sentinels.
func do[T any](s *Storage, op, key string, fn func(r *os.Root, name string) (T, error)) (v T, err error) {
	r, err := os.OpenRoot(s.root)
	if err == nil {
		defer r.Close()
		if v, err = fn(r, key+"@"); err == nil {
			return v, nil
		}
	}
	sentinel := stream.ErrUnavailable // also when the root is away
	if r != nil && errors.Is(err, fs.ErrNotExist) {
		sentinel = stream.ErrNotFound
	} else if r != nil && errors.Is(err, fs.ErrExist) {
		sentinel = stream.ErrAlreadyExists
	}
	return v, fmt.Errorf("%w: dirstore %s %q in %s: %v", sentinel, op, key, s.root, err)
}

// put writes an fsynced temp file, gives it key's name with place (link
// fails if the name exists, rename overwrites) and fsyncs the directory.
func (s *Storage) put(op, key string, data []byte, place func(r *os.Root, tmp, name string) error) error {
	_, err := do(s, op, key, func(r *os.Root, name string) (any, error) {
		tmp := "tmp-" + rand.Text()
		f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, err
		}
		defer r.Remove(tmp)
		_, err = f.Write(data)
		if err = errors.Join(err, f.Sync(), f.Close(), r.MkdirAll(path.Dir(name), 0o755)); err == nil {
			err = place(r, tmp, name)
		}
		if err == nil {
			d, derr := r.Open(path.Dir(name))
			err = errors.Join(derr, d.Sync(), d.Close()) // a nil *os.File returns ErrInvalid
		}
		return nil, err
	})
	return err
}

// PutIfAbsent implements chunked.Storage.
func (s *Storage) PutIfAbsent(_ context.Context, key string, data []byte) error {
	return s.put("put-if-absent", key, data, (*os.Root).Link)
}

// Put implements chunked.Storage.
func (s *Storage) Put(_ context.Context, key string, data []byte) error {
	return s.put("put", key, data, (*os.Root).Rename)
}

// Get implements chunked.Storage.
func (s *Storage) Get(_ context.Context, key string, off, length int64) ([]byte, error) {
	return do(s, "get", key, func(r *os.Root, name string) ([]byte, error) {
		f, err := r.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if length < 0 {
			length = 1 << 62 // to the end
		}
		return io.ReadAll(io.NewSectionReader(f, off, length))
	})
}

// Stat implements chunked.Storage.
func (s *Storage) Stat(_ context.Context, key string) (int64, error) {
	fi, err := do(s, "stat", key, (*os.Root).Stat)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Delete implements chunked.Storage.
func (s *Storage) Delete(_ context.Context, keys []string) error {
	for _, key := range keys {
		_, err := do(s, "delete", key, func(r *os.Root, name string) (any, error) { return nil, r.Remove(name) })
		if err != nil && !errors.Is(err, stream.ErrNotFound) {
			return err
		}
	}
	return nil
}

// List implements chunked.Storage by walking the prefix's directory.
func (s *Storage) List(_ context.Context, prefix, after string, limit int) ([]string, error) {
	keys, err := do(s, "list", prefix, func(r *os.Root, _ string) (keys []string, err error) {
		err = fs.WalkDir(r.FS(), cmp.Or(strings.TrimSuffix(prefix, "/"), "."), func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) || err == nil && (d.IsDir() || !strings.HasSuffix(p, "@")) {
				return nil // nothing under prefix, a directory deleted meanwhile, a temp file
			} else if key := strings.TrimSuffix(p, "@"); err == nil && key > after {
				keys = append(keys, key)
			}
			return err
		})
		return keys, err
	})
	if slices.Sort(keys); limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys, err
}

// Close implements chunked.Storage.
func (s *Storage) Close() error { return nil }
