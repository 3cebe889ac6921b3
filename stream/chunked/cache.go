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
}

func newChunkCache(limit int64) *chunkCache {
	return &chunkCache{limit: limit, ll: list.New(), items: map[cacheKey]*list.Element{}}
}

func (c *chunkCache) get(l layout, seq uint64, id putID) ([]stream.Batch, bool) {
	if c.limit <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[cacheKey{l.chunk(seq), id}]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cacheItem).batches, true
}

// add caches batches; they must not be modified afterwards.
func (c *chunkCache) add(l layout, seq uint64, id putID, batches []stream.Batch, size int) {
	if c.limit <= 0 || int64(size) > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{l.chunk(seq), id}
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.ll.PushFront(&cacheItem{k: k, batches: batches, size: int64(size)})
	c.size += int64(size)
	for c.size > c.limit {
		e := c.ll.Back()
		it := e.Value.(*cacheItem)
		c.ll.Remove(e)
		delete(c.items, it.k)
		c.size -= it.size
	}
}
