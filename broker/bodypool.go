package broker

import (
	"sync"
	"sync/atomic"
)

// A partition's records in a Produce request read as it arrives
// (readProduce) go into a buffer of their own. The runtime zeroes every
// fresh buffer before the records overwrite it, a pass over each byte as
// costly as reading it; buffers of minPooledBody to maxPooledBody bytes
// are taken from bodyPools instead, and given back once the partition's
// append has completed: the log and its stream then hold no reference to
// them (stream.Stream.Append's buffer ownership).
const (
	minPooledBody = 64 << 10
	maxPooledBody = 16 << 20
)

// bodyPools hold buffers of minPooledBody << i bytes of capacity;
// bodiesReused counts the buffers getBody took from them.
var (
	bodyPools    [9]sync.Pool
	bodiesReused atomic.Int64
)

// bodyClass is the index of the smallest pool whose buffers hold n bytes,
// or -1 when n is outside the pooled sizes.
func bodyClass(n int) int {
	if n < minPooledBody || n > maxPooledBody {
		return -1
	}
	c := 0
	for minPooledBody<<c < n {
		c++
	}
	return c
}

// getBody returns a buffer of n bytes, pooled when n is a pooled size.
// Its bytes are not zeroed.
func getBody(n int) []byte {
	c := bodyClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := bodyPools[c].Get().(*[]byte); ok {
		bodiesReused.Add(1)
		return (*p)[:n]
	}
	return make([]byte, n, minPooledBody<<c)
}

// putBody gives b back to its pool, if it is the size of one; the caller
// holds no reference to it any more, nor does anything it handed b to.
func putBody(b []byte) {
	c := bodyClass(cap(b))
	if c < 0 || cap(b) != minPooledBody<<c {
		return
	}
	b = b[:cap(b)]
	bodyPools[c].Put(&b)
}
