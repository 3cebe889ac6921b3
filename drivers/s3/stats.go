package s3

import (
	"sync/atomic"

	"github.com/stratastream/strata/stream/chunked"
)

// counters are the storage's request counts. Every HTTP request is
// counted once, retries included (each attempt is billed).
type counters struct {
	puts, gets, heads, lists, deletes atomic.Int64
	bytesWritten, bytesRead           atomic.Int64
	retries, errors                   atomic.Int64
}

// RequestStats returns the requests made so far: Puts (PutObject, plain
// and conditional), Gets (GetObject, the open probe included), Heads
// (HeadObject), Lists (ListObjectsV2 pages), Deletes (DeleteObject and
// DeleteObjects requests, not keys); BytesWritten and BytesRead are
// object payload bytes sent and received; Retries counts repeated
// attempts; Errors counts operations that failed with
// stream.ErrUnavailable (not "absent" or "taken").
func (s *Storage) RequestStats() chunked.RequestStats {
	c := &s.stats
	return chunked.RequestStats{
		Puts: c.puts.Load(), Gets: c.gets.Load(), Heads: c.heads.Load(),
		Lists: c.lists.Load(), Deletes: c.deletes.Load(),
		BytesWritten: c.bytesWritten.Load(), BytesRead: c.bytesRead.Load(),
		Retries: c.retries.Load(), Errors: c.errors.Load(),
	}
}
