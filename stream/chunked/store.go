package chunked

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/stratastream/strata/stream"
)

// Store implements stream.Store on a Storage.
type Store struct {
	st   Storage
	opts Options
}

// NewStore returns a stream.Store that keeps its streams on st. The Store
// owns st: Store.Close closes it.
func NewStore(st Storage, opts Options) (stream.Store, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: chunked.NewStore: nil Storage", stream.ErrInvalidArgument)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{st: st, opts: o}, nil
}

// Info implements stream.Store.
func (s *Store) Info() stream.Info {
	return stream.Info{
		Driver:          s.opts.Driver,
		Version:         s.opts.Version,
		MaxBatchBytes:   s.opts.MaxBatchBytes,
		MaxProperties:   s.opts.MaxProperties,
		MaxFetchBytes:   s.opts.MaxFetchBytes,
		ReadOnlyOpen:    true,
		Durable:         s.opts.Durable,
		SharedNamespace: s.opts.Durable,
	}
}

var errTODO = fmt.Errorf("%w: chunked engine: not implemented yet", stream.ErrUnavailable)

// Create implements stream.Store.
func (s *Store) Create(ctx context.Context, name string) error { return errTODO }

// Open implements stream.Store.
func (s *Store) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.Stream, error) {
	return nil, errTODO
}

// Delete implements stream.Store.
func (s *Store) Delete(ctx context.Context, name string) error { return errTODO }

// List implements stream.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) { return nil, errTODO }

// Close implements stream.Store.
func (s *Store) Close() error { return s.st.Close() }

func randomID() string { return rand.Text() }
