package plugin

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// hostStore is the host side of a Store that lives in a driver process: a
// stream.DriverStore, behind the front door (stream.NewStore), which has
// checked names, contexts, modes and the closed state before a call gets
// here.
type hostStore struct {
	c      *Client
	id     uint64
	info   stream.Info
	owns   bool // Close also closes the Client (plugin.Open)
	closed atomic.Bool
}

var _ stream.DriverStore = (*hostStore)(nil)

func (s *hostStore) Info() stream.Info { return s.info }

// check fails with ErrClosed after Close (a Supervisor holds hostStores
// without a front door) or once the driver process is gone, before any RPC.
func (s *hostStore) check(what string) error {
	if s.closed.Load() {
		return fmt.Errorf("%w: %s: store of %s", stream.ErrClosed, what, s.c.describe())
	}
	return s.c.check(what)
}

func (s *hostStore) Create(ctx context.Context, name string) error {
	what := fmt.Sprintf("create stream %q", name)
	if err := s.check(what); err != nil {
		return err
	}
	_, err := s.c.rpc.Create(ctx, &streamv1.StreamNameRequest{Store: s.id, Name: []byte(name)})
	return s.c.callErr(ctx, what, err)
}

func (s *hostStore) Delete(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete stream %q", name)
	if err := s.check(what); err != nil {
		return err
	}
	_, err := s.c.rpc.Delete(ctx, &streamv1.StreamNameRequest{Store: s.id, Name: []byte(name)})
	return s.c.callErr(ctx, what, err)
}

func (s *hostStore) List(ctx context.Context, prefix string) ([]string, error) {
	what := fmt.Sprintf("list streams with prefix %q", prefix)
	if err := s.check(what); err != nil {
		return nil, err
	}
	resp, err := s.c.rpc.List(ctx, &streamv1.ListRequest{Store: s.id, Prefix: []byte(prefix)})
	if err != nil {
		return nil, s.c.callErr(ctx, what, err)
	}
	return resp.GetNames(), nil
}

func (s *hostStore) Open(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	what := fmt.Sprintf("open stream %q (%s, epoch %d)", name, opts.Mode, opts.Epoch)
	if err := s.check(what); err != nil {
		return nil, err
	}
	resp, err := s.c.rpc.OpenStream(ctx, &streamv1.OpenStreamRequest{
		Store:           s.id,
		Name:            []byte(name),
		Epoch:           opts.Epoch,
		Mode:            modeToProto(opts.Mode),
		CreateIfMissing: opts.CreateIfMissing,
	})
	if err != nil {
		return nil, s.c.callErr(ctx, what, err)
	}
	h := &hostStream{
		c:       s.c,
		session: resp.GetSession(),
		name:    name,
		epoch:   resp.GetEpoch(),
		mode:    opts.Mode,

		maxFetch: s.info.MaxFetchBytes,
	}
	h.start.Store(resp.GetStartOffset())
	h.next.Store(resp.GetNextOffset())
	return h, nil
}

// Close closes the store in the driver process; for a Store of plugin.Open
// it then stops the driver process.
func (s *hostStore) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: store of %s", stream.ErrClosed, s.c.describe())
	}
	var err error
	if cerr := s.c.check("close store"); cerr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), exitGrace)
		_, err = s.c.rpc.CloseStore(ctx, &streamv1.CloseStoreRequest{Store: s.id})
		err = s.c.callErr(ctx, "close store", err)
		cancel()
	}
	if s.owns {
		if cerr := s.c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
