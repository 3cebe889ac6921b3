package chunked

import (
	"container/list"
	"sync"

	"github.com/stratastream/strata/stream"
)

// chunkCache is a bounded LRU of decoded chunks, shared by a Store's
// sessions. Entries are keyed by object and put id, so a slot that GC freed
// and a stale writer refilled is never served from the cache.
type chunkCache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	ll    *list.List
	items map[cacheKey]*list.Element
}

type cacheKey struct {
	key string
	id  putID
}

type cacheItem struct {
	k       cacheKey
	batches []stream.Batch
	size    int64
	// unverified lists the batches whose stored checksums derive from a
	// checksum the caller supplied at Append (stream.Batch.PayloadChecksum)
	// rather than from their bytes; get checks them before it serves the
	// chunk the first time.
	unverified []suppliedSum
}

// suppliedSum is the checksum the caller supplied for batch i of a chunk.
type suppliedSum struct {
	i   int
	crc uint32
}

func newChunkCache(limit int64) *chunkCache {
	return &chunkCache{limit: limit, ll: list.New(), items: map[cacheKey]*list.Element{}}
}

// get returns the cached batches of a chunk (ok false when it is not
// cached). A chunk holding batches whose caller-supplied checksums are not
// verified yet is verified first, outside the lock; a mismatch drops it from
// the cache and is an error wrapping stream.ErrCorrupt (the stored object
// fails decodeChunk the same way).
func (c *chunkCache) get(l layout, seq uint64, id putID) (batches []stream.Batch, ok bool, err error) {
	if c.limit <= 0 {
		return nil, false, nil
	}
	k := cacheKey{l.chunk(seq), id}
	c.mu.Lock()
	e, ok := c.items[k]
	if !ok {
		c.mu.Unlock()
		return nil, false, nil
	}
	c.ll.MoveToFront(e)
	it := e.Value.(*cacheItem)
	batches, check := it.batches, it.unverified
	c.mu.Unlock()
	for _, u := range check {
		b := batches[u.i]
		if got := stream.Checksum(b.Payload); got != u.crc {
			c.remove(it)
			return nil, true, corruptf("batch at offset %d: payload checksum %08x, the checksum supplied at Append was %08x", b.BaseOffset, got, u.crc)
		}
	}
	if len(check) > 0 {
		c.mu.Lock()
		it.unverified = nil
		c.mu.Unlock()
	}
	return batches, true, nil
}

// remove drops it if it is still cached.
func (c *chunkCache) remove(it *cacheItem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[it.k]; ok && e.Value.(*cacheItem) == it {
		c.ll.Remove(e)
		delete(c.items, it.k)
		c.size -= it.size
	}
}

// add caches batches; they must not be modified afterwards. unverified
// lists those whose payload get must check against the checksum the caller
// supplied before serving them.
func (c *chunkCache) add(l layout, seq uint64, id putID, batches []stream.Batch, size int, unverified []suppliedSum) {
	if c.limit <= 0 || int64(size) > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{l.chunk(seq), id}
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.ll.PushFront(&cacheItem{k: k, batches: batches, size: int64(size), unverified: unverified})
	c.size += int64(size)
	for c.size > c.limit {
		e := c.ll.Back()
		it := e.Value.(*cacheItem)
		c.ll.Remove(e)
		delete(c.items, it.k)
		c.size -= it.size
	}
}
