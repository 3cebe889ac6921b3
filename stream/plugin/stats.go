package plugin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// Stats serves Store.BackendStats of a store in the driver process.
func (s *server) Stats(ctx context.Context, req *streamv1.StatsRequest) (*streamv1.StatsResponse, error) {
	st, err := s.store(req.GetStore())
	if err != nil {
		return nil, toStatus(err)
	}
	v, err := st.BackendStats(ctx)
	if errors.Is(err, errors.ErrUnsupported) {
		return &streamv1.StatsResponse{}, nil
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &streamv1.StatsResponse{
		Counted: true, Puts: v.Puts, Gets: v.Gets, Heads: v.Heads, Lists: v.Lists, Deletes: v.Deletes,
		BytesWritten: v.BytesWritten, BytesRead: v.BytesRead, Retries: v.Retries, Errors: v.Errors,
	}, nil
}

var _ stream.StatsReporter = (*hostStore)(nil)

// BackendStats implements stream.StatsReporter: the counts of the store in
// the driver process, one RPC. A driver whose store does not count, or a
// driver binary built before the Stats call existed, gives an error
// matching errors.ErrUnsupported.
func (s *hostStore) BackendStats(ctx context.Context) (stream.RequestStats, error) {
	what := "backend request stats"
	if err := s.check(what); err != nil {
		return stream.RequestStats{}, err
	}
	resp, err := s.c.rpc.Stats(ctx, &streamv1.StatsRequest{Store: s.id})
	if status.Code(err) == codes.Unimplemented {
		return stream.RequestStats{}, fmt.Errorf("%s of %s: the driver has no stats call: %w", what, s.c.describe(), errors.ErrUnsupported)
	}
	if err := s.c.callErr(ctx, what, err); err != nil {
		return stream.RequestStats{}, err
	}
	if !resp.GetCounted() {
		return stream.RequestStats{}, fmt.Errorf("%s of %s: the driver's store does not count its requests: %w", what, s.c.describe(), errors.ErrUnsupported)
	}
	return stream.RequestStats{
		Puts: resp.GetPuts(), Gets: resp.GetGets(), Heads: resp.GetHeads(), Lists: resp.GetLists(), Deletes: resp.GetDeletes(),
		BytesWritten: resp.GetBytesWritten(), BytesRead: resp.GetBytesRead(), Retries: resp.GetRetries(), Errors: resp.GetErrors(),
	}, nil
}
