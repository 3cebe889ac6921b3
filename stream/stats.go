package stream

import "context"

// RequestStats counts the requests a Store made to its backend since it
// was opened, so that cost (requests × price) and efficiency can be
// computed: an S3 bill is mostly PUTs and GETs, a NameNode's load is mostly
// files created.
type RequestStats struct {
	Puts, Gets, Heads, Lists, Deletes int64
	BytesWritten, BytesRead           int64
	Retries, Errors                   int64
}

// Sub returns s - before, field by field: the requests made between two
// readings.
func (s RequestStats) Sub(before RequestStats) RequestStats {
	return RequestStats{
		Puts: s.Puts - before.Puts, Gets: s.Gets - before.Gets, Heads: s.Heads - before.Heads,
		Lists: s.Lists - before.Lists, Deletes: s.Deletes - before.Deletes,
		BytesWritten: s.BytesWritten - before.BytesWritten, BytesRead: s.BytesRead - before.BytesRead,
		Retries: s.Retries - before.Retries, Errors: s.Errors - before.Errors,
	}
}

// Add returns s + o, field by field: the counts of two stores together.
func (s RequestStats) Add(o RequestStats) RequestStats {
	return s.Sub(RequestStats{}.Sub(o))
}

// StatsReporter is an optional interface of a Store that counts the
// requests it makes to its backend. Every Store of the chunked engine
// implements it, and so does a Store served by a driver process (the
// counts cross the plugin boundary). BackendStats fails with an error
// matching errors.ErrUnsupported when this Store does not count (the
// memory driver has no backend; an older driver binary has no stats call).
type StatsReporter interface {
	BackendStats(ctx context.Context) (RequestStats, error)
}
