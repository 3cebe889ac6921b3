package sharedlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/stream"
)

// maxAllocAttempts bounds the retries of one AllocateProducerIDs.
const maxAllocAttempts = 64

// AllocateProducerIDs reserves n producer ids for an InitProducerId handler,
// unique across every process that allocates from the same stream name on
// the same store: they are the offsets [first, first+n) of one append to
// that stream, and a stream never gives an offset twice. Every allocator
// opens the stream at epoch 0, so each open supersedes the previous one; an
// allocation fenced by a racing one is retried. A broker allocates blocks
// (say 1000 ids) and hands them out from memory.
func AllocateProducerIDs(ctx context.Context, store *stream.Store, name string, n int) (int64, error) {
	if n < 1 || int64(n) > int64(^uint32(0)) {
		return 0, &Error{Code: kerr.InvalidRequest.Code, Op: "allocate producer ids", Msg: fmt.Sprintf("block size %d outside [1, 2^32)", n)}
	}
	var last error
	var took time.Duration
	for attempt := range maxAllocAttempts {
		if attempt > 0 {
			// Randomised exponential backoff in units of what one attempt
			// takes on this backend, so that racing allocators on a slow
			// backend stop fencing each other.
			unit := max(took, time.Millisecond)
			select {
			case <-time.After(time.Duration(rand.Int64N(int64(unit) << min(attempt, 6)))):
			case <-ctx.Done():
				return 0, wrapErr(name, "allocate producer ids", ctx.Err())
			}
		}
		began := time.Now()
		st, err := store.Open(ctx, name, stream.OpenOptions{Epoch: 0, CreateIfMissing: true})
		if err == nil {
			var r stream.AppendResult
			r, err = stream.Append(ctx, st, stream.Batch{Count: uint32(n), Timestamp: time.Now().UnixMilli(), Payload: []byte("producer ids")})
			_ = st.Close()
			if err == nil {
				return r.BaseOffset, nil
			}
		}
		took = time.Since(began)
		// A racing allocator's open fenced this one (during our open, on
		// some drivers, or before our append): try again.
		if !errors.Is(err, stream.ErrFenced) && !errors.Is(err, stream.ErrAlreadyExists) {
			return 0, wrapErr(name, "allocate producer ids", err)
		}
		last = err
	}
	return 0, wrapErr(name, "allocate producer ids", fmt.Errorf("gave up after %d racing allocations: %w", maxAllocAttempts, last))
}
