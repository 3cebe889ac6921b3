package hdfs

import (
	"sync/atomic"

	"github.com/stratastream/strata/stream/chunked"
)

// stats counts the Storage's calls (one per chunked.Storage call, not per
// NameNode RPC; docs/drivers/hdfs.md lists the RPCs each makes).
type stats struct {
	puts, gets, heads, lists, deletes atomic.Int64
	written, read                     atomic.Int64
	retries, errors, swept            atomic.Int64
}

// RequestStats implements chunked.StatsReporter.
func (s *Storage) RequestStats() chunked.RequestStats {
	return chunked.RequestStats{
		Puts:         s.stats.puts.Load(),
		Gets:         s.stats.gets.Load(),
		Heads:        s.stats.heads.Load(),
		Lists:        s.stats.lists.Load(),
		Deletes:      s.stats.deletes.Load(),
		BytesWritten: s.stats.written.Load(),
		BytesRead:    s.stats.read.Load(),
		Retries:      s.stats.retries.Load(),
		Errors:       s.stats.errors.Load(),
	}
}

// Swept is how many abandoned temp objects this Storage removed.
func (s *Storage) Swept() int64 { return s.stats.swept.Load() }
