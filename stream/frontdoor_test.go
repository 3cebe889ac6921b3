package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stratastream/strata/stream"
)

// carelessStore is a driver that checks nothing: it records every call
// that reaches it and succeeds. Behind the front door it must never see a
// call the contract refuses.
type carelessStore struct{ calls []string }

func (c *carelessStore) record(format string, args ...any) {
	c.calls = append(c.calls, fmt.Sprintf(format, args...))
}

func (c *carelessStore) Info() stream.Info {
	return stream.Info{Driver: "careless", MaxBatchBytes: 100, MaxProperties: 2, MaxFetchBytes: 1000, ReadOnlyOpen: true}
}
func (c *carelessStore) Create(_ context.Context, name string) error {
	c.record("Create %q", name)
	return nil
}
func (c *carelessStore) Delete(_ context.Context, name string) error {
	c.record("Delete %q", name)
	return nil
}
func (c *carelessStore) List(_ context.Context, prefix string) ([]string, error) {
	c.record("List %q", prefix)
	return nil, nil
}
func (c *carelessStore) Close() error {
	c.record("Close store")
	return nil
}
func (c *carelessStore) Open(_ context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	c.record("Open %q mode %d", name, o.Mode)
	return &carelessStream{c: c, name: name}, nil
}

type carelessStream struct {
	c    *carelessStore
	name string
}

func (s *carelessStream) Name() string       { return s.name }
func (s *carelessStream) Epoch() uint64      { return 1 }
func (s *carelessStream) StartOffset() int64 { return 0 }
func (s *carelessStream) NextOffset() int64  { return 0 }
func (s *carelessStream) Append(_ context.Context, b stream.Batch) *stream.AppendFuture {
	s.c.record("Append count %d", b.Count)
	f, complete := stream.NewAppendFuture()
	complete(stream.AppendResult{NextOffset: int64(b.Count)}, nil)
	return f
}
func (s *carelessStream) Fetch(_ context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	s.c.record("Fetch %d %d max %d", start, end, maxBytes)
	return nil, nil
}
func (s *carelessStream) Trim(_ context.Context, newStart int64) error {
	s.c.record("Trim %d", newStart)
	return nil
}
func (s *carelessStream) Close() error {
	s.c.record("Close stream")
	return nil
}

// TestFrontDoorGuardsCarelessDriver: a driver that checks nothing, behind
// stream.NewStore, still gives the contract's errors for bad names, bad
// batches and modes, nil and done contexts, use after Close and bad Fetch
// arguments, and none of those calls reach it.
func TestFrontDoorGuardsCarelessDriver(t *testing.T) {
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	d := &carelessStore{}
	s := stream.NewStore(d)
	st, err := s.Open(ctx, "good", stream.OpenOptions{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := s.Open(ctx, "good", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	appendErr := func(st *stream.Stream, ctx context.Context, b stream.Batch) error {
		_, err := st.Append(ctx, b).Result()
		return err
	}
	var nilCtx context.Context
	big := stream.Batch{Count: 1, Payload: make([]byte, 101)}
	props := stream.Batch{Count: 1, Properties: map[string]string{"a": "", "b": "", "c": ""}}
	cases := []struct {
		what string
		err  error
		want error
	}{
		{"Create bad name", s.Create(ctx, "../x"), stream.ErrInvalidArgument},
		{"Delete bad name", s.Delete(ctx, "/abs"), stream.ErrInvalidArgument},
		{"Open bad name", second(s.Open(ctx, "a//b", stream.OpenOptions{Epoch: 1})), stream.ErrInvalidArgument},
		{"Open bad mode", second(s.Open(ctx, "good", stream.OpenOptions{Mode: 7})), stream.ErrInvalidArgument},
		{"Create done ctx", s.Create(done, "x"), context.Canceled},
		{"Open done ctx", second(s.Open(done, "x", stream.OpenOptions{Epoch: 1})), context.Canceled},
		{"List done ctx", second(s.List(done, "")), context.Canceled},
		{"Create nil ctx", s.Create(nilCtx, "x"), stream.ErrInvalidArgument},
		{"Append count 0", appendErr(st, ctx, stream.Batch{}), stream.ErrInvalidArgument},
		{"Append too large", appendErr(st, ctx, big), stream.ErrBatchTooLarge},
		{"Append too many properties", appendErr(st, ctx, props), stream.ErrBatchTooLarge},
		{"Append empty property key", appendErr(st, ctx, stream.Batch{Count: 1, Properties: map[string]string{"": "v"}}), stream.ErrInvalidArgument},
		{"Append done ctx", appendErr(st, done, stream.Batch{Count: 1}), context.Canceled},
		{"Append nil ctx", appendErr(st, nilCtx, stream.Batch{Count: 1}), stream.ErrInvalidArgument},
		{"Append read-only", appendErr(ro, ctx, stream.Batch{Count: 1}), stream.ErrInvalidArgument},
		{"Trim read-only", ro.Trim(ctx, 1), stream.ErrInvalidArgument},
		{"Trim done ctx", st.Trim(done, 1), context.Canceled},
		{"Fetch done ctx", second(st.Fetch(done, 0, stream.NoEnd, 0)), context.Canceled},
		{"Fetch start < 0", second(st.Fetch(ctx, -1, stream.NoEnd, 0)), stream.ErrOffsetOutOfRange},
	}
	_ = st.Close()
	cases = append(cases, []struct {
		what string
		err  error
		want error
	}{
		{"Append after Close", appendErr(st, ctx, stream.Batch{Count: 1}), stream.ErrClosed},
		{"Fetch after Close", second(st.Fetch(ctx, 0, stream.NoEnd, 0)), stream.ErrClosed},
		{"Trim after Close", st.Trim(ctx, 0), stream.ErrClosed},
		{"second stream Close", st.Close(), stream.ErrClosed},
	}...)
	_ = s.Close()
	cases = append(cases, []struct {
		what string
		err  error
		want error
	}{
		{"Create after Close", s.Create(ctx, "x"), stream.ErrClosed},
		{"Open after Close", second(s.Open(ctx, "x", stream.OpenOptions{Epoch: 1})), stream.ErrClosed},
		{"Delete after Close", s.Delete(ctx, "x"), stream.ErrClosed},
		{"List after Close", second(s.List(ctx, "")), stream.ErrClosed},
		{"second store Close", s.Close(), stream.ErrClosed},
	}...)
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.err, c.want)
		}
	}
	want := []string{`Open "good" mode 0`, `Open "good" mode 1`, "Close stream", "Close store"}
	if strings.Join(d.calls, "; ") != strings.Join(want, "; ") {
		t.Errorf("calls that reached the driver:\n%s\nwant only:\n%s", strings.Join(d.calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestFrontDoorFetchMaxBytes: Fetch hands the driver a maxBytes in
// (0, Info.MaxFetchBytes], and errors the driver returns without the
// stream's name get it.
func TestFrontDoorFetchMaxBytes(t *testing.T) {
	ctx := context.Background()
	d := &carelessStore{}
	st, err := stream.NewStore(d).Open(ctx, "s", stream.OpenOptions{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, mb := range []int{0, -5, 5000, 10} {
		if _, err := st.Fetch(ctx, 0, stream.NoEnd, mb); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{`Open "s" mode 0`, "Fetch 0 9223372036854775807 max 1000", "Fetch 0 9223372036854775807 max 1000", "Fetch 0 9223372036854775807 max 1000", "Fetch 0 9223372036854775807 max 10"}
	if strings.Join(d.calls, "; ") != strings.Join(want, "; ") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(d.calls, "\n"), strings.Join(want, "\n"))
	}
	err = stream.NewStore(failing{d}).Create(ctx, "named")
	if !errors.Is(err, stream.ErrNotFound) || !strings.Contains(err.Error(), `"named"`) {
		t.Errorf("driver error through the front door: %v, want ErrNotFound naming the stream", err)
	}
}

// TestFrontDoorFlush: Flush reaches a driver that batches (Flusher) from a
// read-write session only, and never after Close.
func TestFrontDoorFlush(t *testing.T) {
	ctx := context.Background()
	d := &carelessStore{}
	store := stream.NewStore(flushing{d})
	rw, err := store.Open(ctx, "rw", stream.OpenOptions{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := store.Open(ctx, "ro", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	rw.Flush()
	ro.Flush()
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	rw.Flush()
	plain, err := stream.NewStore(d).Open(ctx, "plain", stream.OpenOptions{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	plain.Flush() // a driver that does not batch: nothing to call
	want := []string{`Open "rw" mode 0`, `Open "ro" mode 1`, `Flush "rw"`, "Close stream", `Open "plain" mode 0`}
	if strings.Join(d.calls, "; ") != strings.Join(want, "; ") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(d.calls, "\n"), strings.Join(want, "\n"))
	}
}

// flushing is a careless driver whose streams are Flushers.
type flushing struct{ *carelessStore }

func (f flushing) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := f.carelessStore.Open(ctx, name, o)
	return flushingStream{st.(*carelessStream)}, err
}

type flushingStream struct{ *carelessStream }

func (s flushingStream) Flush() { s.c.record("Flush %q", s.name) }

// failing is a careless driver whose Create fails with a bare sentinel.
type failing struct{ *carelessStore }

func (failing) Create(context.Context, string) error { return stream.ErrNotFound }

func second[T any](_ T, err error) error { return err }
