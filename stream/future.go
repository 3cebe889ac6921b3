package stream

import (
	"context"
	"sync"
)

// AppendResult is what a successful append returns.
type AppendResult struct {
	// BaseOffset is the first offset of the appended batch.
	BaseOffset int64
	// NextOffset is BaseOffset + Count.
	NextOffset int64
}

// AppendFuture is the pending result of one Stream.Append.
type AppendFuture struct {
	done chan struct{}
	once sync.Once
	res  AppendResult
	err  error
}

// NewAppendFuture returns a pending future and the function that completes
// it. Drivers use it; the completion function may be called more than once,
// only the first call counts.
func NewAppendFuture() (*AppendFuture, func(AppendResult, error)) {
	f := &AppendFuture{done: make(chan struct{})}
	return f, f.complete
}

// FailedAppend returns a future already completed with err.
func FailedAppend(err error) *AppendFuture {
	f, complete := NewAppendFuture()
	complete(AppendResult{}, err)
	return f
}

func (f *AppendFuture) complete(r AppendResult, err error) {
	f.once.Do(func() {
		f.res, f.err = r, err
		close(f.done)
	})
}

// Done is closed when the append has completed.
func (f *AppendFuture) Done() <-chan struct{} { return f.done }

// Completed reports, without blocking, whether the append has completed.
func (f *AppendFuture) Completed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// Wait blocks until the append completes or ctx is done. A ctx that ends
// first returns ctx.Err() and leaves the append running.
func (f *AppendFuture) Wait(ctx context.Context) (AppendResult, error) {
	select {
	case <-f.done:
		return f.res, f.err
	case <-ctx.Done():
		return AppendResult{}, ctx.Err()
	}
}

// Result returns the outcome; it blocks until the append completes.
func (f *AppendFuture) Result() (AppendResult, error) {
	<-f.done
	return f.res, f.err
}

// Append appends b to s and waits for its acknowledgement. s is a *Stream,
// or a DriverStream that a layered driver (such as stream/wal) or a test
// calls directly.
func Append(ctx context.Context, s DriverStream, b Batch) (AppendResult, error) {
	return s.Append(ctx, b).Wait(ctx)
}
