package chunked

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/stratastream/strata/stream"
)

// MemStorage is an in-memory Storage for engine tests and examples. It is
// durable only as long as the process lives; several Stores built on the
// same MemStorage share one namespace.
type MemStorage struct {
	mu     sync.Mutex
	objs   map[string][]byte
	stats  RequestStats
	closed bool
}

// NewMemStorage returns an empty in-memory Storage.
func NewMemStorage() *MemStorage { return &MemStorage{objs: map[string][]byte{}} }

var (
	_ Storage       = (*MemStorage)(nil)
	_ StatsReporter = (*MemStorage)(nil)
)

func (m *MemStorage) check(ctx context.Context, key string) error {
	if m.closed {
		return fmt.Errorf("%w: memstorage: %s: storage closed", stream.ErrUnavailable, key)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: memstorage: %s: %w", stream.ErrUnavailable, key, err)
	}
	return nil
}

// PutIfAbsent implements Storage.
func (m *MemStorage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, key); err != nil {
		return err
	}
	m.stats.Puts++
	if _, ok := m.objs[key]; ok {
		return fmt.Errorf("%w: memstorage: %s", stream.ErrAlreadyExists, key)
	}
	m.objs[key] = append([]byte(nil), data...)
	m.stats.BytesWritten += int64(len(data))
	return nil
}

// Put implements Storage.
func (m *MemStorage) Put(ctx context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, key); err != nil {
		return err
	}
	m.stats.Puts++
	m.objs[key] = append([]byte(nil), data...)
	m.stats.BytesWritten += int64(len(data))
	return nil
}

// Get implements Storage.
func (m *MemStorage) Get(ctx context.Context, key string, off, length int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, key); err != nil {
		return nil, err
	}
	m.stats.Gets++
	b, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("%w: memstorage: %s", stream.ErrNotFound, key)
	}
	if off < 0 {
		return nil, fmt.Errorf("%w: memstorage: %s: negative offset %d", stream.ErrInvalidArgument, key, off)
	}
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	end := int64(len(b))
	if length >= 0 && off+length < end {
		end = off + length
	}
	m.stats.BytesRead += end - off
	return append([]byte(nil), b[off:end]...), nil
}

// Stat implements Storage.
func (m *MemStorage) Stat(ctx context.Context, key string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, key); err != nil {
		return 0, err
	}
	m.stats.Heads++
	b, ok := m.objs[key]
	if !ok {
		return 0, fmt.Errorf("%w: memstorage: %s", stream.ErrNotFound, key)
	}
	return int64(len(b)), nil
}

// Delete implements Storage.
func (m *MemStorage) Delete(ctx context.Context, keys []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, strings.Join(keys, ",")); err != nil {
		return err
	}
	m.stats.Deletes++
	for _, k := range keys {
		delete(m.objs, k)
	}
	return nil
}

// List implements Storage.
func (m *MemStorage) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, prefix); err != nil {
		return nil, err
	}
	m.stats.Lists++
	var out []string
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) && k > after {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Close implements Storage. Later calls fail with ErrUnavailable.
func (m *MemStorage) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// RequestStats implements StatsReporter.
func (m *MemStorage) RequestStats() RequestStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Corrupt flips one byte of key at off (tests of checksum handling). It
// reports whether the key existed and was long enough.
func (m *MemStorage) Corrupt(key string, off int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok || off < 0 || off >= len(b) {
		return false
	}
	b[off] ^= 0xff
	return true
}

// Keys returns every stored key, sorted (tests).
func (m *MemStorage) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.objs))
	for k := range m.objs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
