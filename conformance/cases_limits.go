package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stratastream/strata/stream"
)

var _ = register(FamilyLimits,
	Case{Name: "info-declared", Doc: "Info names the driver and declares usable limits", run: caseInfoDeclared},
	Case{Name: "empty-batch", Doc: "a batch with Count 0 is ErrInvalidArgument and uses no offset", run: caseEmptyBatch},
	Case{Name: "oversized-batch", Doc: "a batch above MaxBatchBytes (payload, or payload plus properties) is ErrBatchTooLarge and uses no offset", run: caseOversizedBatch},
	Case{Name: "too-many-properties", Doc: "more than MaxProperties properties is ErrBatchTooLarge; an empty property key is ErrInvalidArgument", run: caseTooManyProperties},
	Case{Name: "bad-names", Doc: "bad names (empty, ../x, /abs, a//b, NUL, 256 bytes, ...) are ErrInvalidArgument for every call and create nothing", run: caseBadNames},
	Case{Name: "bad-open-mode", Doc: "an unknown open mode is ErrInvalidArgument", run: caseBadOpenMode},
	Case{Name: "offsets-past-end", Doc: "Fetch and Trim past NextOffset are ErrOffsetOutOfRange and change nothing", run: caseOffsetsPastEnd},
	Case{Name: "fetch-below-start", Doc: "Fetch below the start offset (and at -1) is ErrOffsetOutOfRange", run: caseFetchBelowStart},
	Case{Name: "fetch-maxbytes-default", Doc: "maxBytes <= 0 means the driver's MaxFetchBytes: a small log comes back whole", run: caseFetchMaxBytesDefault},
	Case{Name: "cancelled-context", Doc: "every call with a cancelled context fails with an error matching context.Canceled; a cancelled Append uses no offset", run: caseCancelledContext},
	Case{Name: "use-after-close", Doc: "a closed Stream or Store fails ErrClosed; the data stays for others", run: caseUseAfterClose},
)

// intact fails the case unless st still holds exactly acks and nothing
// else, from offset 0.
func (e *env) intact(what string, st *stream.Stream, acks []acked) {
	e.t.Helper()
	if st.NextOffset() != endOf(acks) {
		e.t.Fatalf("%s: NextOffset %d, want %d (data changed)", what, st.NextOffset(), endOf(acks))
	}
	log := e.readAll(st)
	if len(log) != len(acks) {
		e.t.Fatalf("%s: log holds %d batches, want %d", what, len(log), len(acks))
	}
	e.checkHolds(what, log, acks)
}

func caseInfoDeclared(e *env) {
	s := e.store()
	info := s.Info()
	var bad []string
	if info.Driver == "" {
		bad = append(bad, "Driver is empty")
	}
	if info.Version == "" {
		bad = append(bad, "Version is empty")
	}
	if info.MaxBatchBytes <= 0 {
		bad = append(bad, fmt.Sprintf("MaxBatchBytes %d is not positive", info.MaxBatchBytes))
	}
	if info.MaxFetchBytes <= 0 {
		bad = append(bad, fmt.Sprintf("MaxFetchBytes %d is not positive", info.MaxFetchBytes))
	}
	if info.MaxProperties < 0 {
		bad = append(bad, fmt.Sprintf("MaxProperties %d is negative", info.MaxProperties))
	}
	if len(bad) > 0 {
		e.t.Fatalf("Info %+v: %s", info, strings.Join(bad, "; "))
	}
	e.t.Logf("Info: %+v", info)
}

func caseEmptyBatch(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	acks := e.appendMany(st, "eb", 3, 20)
	for _, b := range []stream.Batch{{Count: 0}, {Count: 0, Payload: []byte("x")}} {
		_, err := stream.Append(e.ctx, st, b)
		e.wantErr("append of a batch with Count 0", err, stream.ErrInvalidArgument)
	}
	e.intact("after empty batches", st, acks)
	a := e.appendOK(st, batch("eb", 9, 20))
	if a.Base != endOf(acks) {
		e.t.Fatalf("append after rejected batches at %d, want %d", a.Base, endOf(acks))
	}
}

func caseOversizedBatch(e *env) {
	s := e.store()
	max := s.Info().MaxBatchBytes
	if max <= 0 {
		e.t.Skipf("driver declares no MaxBatchBytes")
	}
	st := e.open(s, e.name("s"), 1)
	acks := e.appendMany(st, "ob", 3, 20)
	over := []stream.Batch{{Count: 1, Payload: make([]byte, max+1)}}
	if s.Info().MaxProperties > 0 {
		over = append(over, stream.Batch{Count: 1, Payload: make([]byte, max-3), Properties: map[string]string{"key": "v"}})
	}
	for _, b := range over {
		_, err := stream.Append(e.ctx, st, b)
		e.wantErr(fmt.Sprintf("append of a %d-byte batch (limit %d)", b.Size(), max), err, stream.ErrBatchTooLarge)
	}
	e.intact("after oversized batches", st, acks)
	a := e.appendOK(st, batch("ob", 9, 20))
	if a.Base != endOf(acks) {
		e.t.Fatalf("append after rejected batches at %d, want %d", a.Base, endOf(acks))
	}
}

func caseTooManyProperties(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	acks := e.appendMany(st, "tmp", 3, 20)
	n := s.Info().MaxProperties + 1
	props := make(map[string]string, n)
	for i := range n {
		props[fmt.Sprintf("p%d", i)] = "v"
	}
	_, err := stream.Append(e.ctx, st, stream.Batch{Count: 1, Properties: props})
	e.wantErr(fmt.Sprintf("append with %d properties (limit %d)", n, n-1), err, stream.ErrBatchTooLarge)
	if n > 1 {
		_, err = stream.Append(e.ctx, st, stream.Batch{Count: 1, Properties: map[string]string{"": "v"}})
		e.wantErr("append with an empty property key", err, stream.ErrInvalidArgument)
		full := make(map[string]string, n-1)
		for i := range n - 1 {
			full[fmt.Sprintf("p%d", i)] = "v"
		}
		acks = append(acks, e.appendOK(st, stream.Batch{Count: 1, Properties: full, Payload: []byte("full")}))
	}
	e.intact("after rejected batches", st, acks)
}

// badNames are names every call must refuse with ErrInvalidArgument.
func badNames(prefix string) []string {
	return []string{
		"", ".", "..", "../x", prefix + "/../x", prefix + "/./x", "/abs", "/" + prefix,
		prefix + "//b", prefix + "/", prefix + "/x/", prefix + "/a\x00b", "a\x00",
		prefix + "/sp ace", prefix + "/tab\t", prefix + "/ü", prefix + "/back\\slash", prefix + "/star*",
		strings.Repeat("n", stream.MaxNameLen+1),
		prefix + "/" + strings.Repeat("n", stream.MaxNameLen-len(prefix)),
	}
}

func caseBadNames(e *env) {
	s := e.store()
	good := e.open(s, e.name("good"), 1)
	acks := e.appendMany(good, "bn", 2, 20)
	for _, n := range badNames(e.prefix) {
		q := fmt.Sprintf("%q", n)
		if len(q) > 40 {
			q = q[:40] + "...\""
		}
		e.wantErr("Create "+q, s.Create(e.ctx, n), stream.ErrInvalidArgument)
		_, err := s.Open(e.ctx, n, stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		e.wantErr("Open(CreateIfMissing) "+q, err, stream.ErrInvalidArgument)
		_, err = s.Open(e.ctx, n, stream.OpenOptions{Mode: stream.ModeReadOnly})
		e.wantErr("read-only Open "+q, err, stream.ErrInvalidArgument)
		e.wantErr("Delete "+q, s.Delete(e.ctx, n), stream.ErrInvalidArgument)
	}
	names, err := s.List(e.ctx, e.prefix+"/")
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	if !slices.Equal(names, []string{e.name("good")}) {
		e.t.Fatalf("List after bad names = %q, want only %q", names, e.name("good"))
	}
	all, err := s.List(e.ctx, "")
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	for _, n := range all {
		if stream.ValidateName(n) != nil {
			e.t.Fatalf("List(\"\") holds the invalid name %q", n)
		}
	}
	e.intact("good stream after bad names", good, acks)
}

func caseBadOpenMode(e *env) {
	s := e.store()
	name := e.name("s")
	if err := s.Create(e.ctx, name); err != nil {
		e.t.Fatalf("create: %v", err)
	}
	for _, m := range []stream.Mode{2, 7, -1} {
		_, err := s.Open(e.ctx, name, stream.OpenOptions{Epoch: 1, Mode: m})
		e.wantErr(fmt.Sprintf("Open with mode %d", m), err, stream.ErrInvalidArgument)
	}
}

func caseOffsetsPastEnd(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	acks := e.appendMany(st, "ope", 5, 50)
	end := endOf(acks)
	for _, off := range []int64{end + 1, end + 1000, 1 << 62} {
		_, err := st.Fetch(e.ctx, off, stream.NoEnd, 0)
		e.wantErr(fmt.Sprintf("Fetch(%d) past NextOffset %d", off, end), err, stream.ErrOffsetOutOfRange)
		e.wantErr(fmt.Sprintf("Trim(%d) past NextOffset %d", off, end), st.Trim(e.ctx, off), stream.ErrOffsetOutOfRange)
	}
	if st.StartOffset() != 0 {
		e.t.Fatalf("StartOffset %d after refused trims, want 0", st.StartOffset())
	}
	e.intact("after out-of-range calls", st, acks)
}

func caseFetchBelowStart(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	acks := e.appendMany(st, "fbs", 10, 50)
	_, err := st.Fetch(e.ctx, -1, stream.NoEnd, 0)
	e.wantErr("Fetch(-1)", err, stream.ErrOffsetOutOfRange)
	to := acks[4].Base
	if err := st.Trim(e.ctx, to); err != nil {
		e.t.Fatalf("Trim(%d): %v", to, err)
	}
	for _, off := range []int64{to - 1, 0, -1} {
		_, err := st.Fetch(e.ctx, off, stream.NoEnd, 0)
		e.wantErr(fmt.Sprintf("Fetch(%d) below start %d", off, to), err, stream.ErrOffsetOutOfRange)
	}
	e.checkHolds("after refused fetches", e.readAll(st), acks[4:])
}

func caseFetchMaxBytesDefault(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	acks := e.appendMany(st, "fmd", 20, 1000)
	for _, mb := range []int{0, -1} {
		bs, err := st.Fetch(e.ctx, 0, stream.NoEnd, mb)
		if err != nil {
			e.t.Fatalf("Fetch(0, maxBytes=%d): %v", mb, err)
		}
		if len(bs) != len(acks) {
			e.t.Fatalf("Fetch(0, maxBytes=%d) of a 20 KB log: %d batches, want all %d (MaxFetchBytes %d)", mb, len(bs), len(acks), s.Info().MaxFetchBytes)
		}
		e.checkHolds("default maxBytes", bs, acks)
	}
}

func caseCancelledContext(e *env) {
	s := e.store()
	name := e.name("s")
	st := e.open(s, name, 1)
	acks := e.appendMany(st, "cc", 5, 50)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err := st.Append(ctx, batch("cc", 99, 50)).Wait(e.ctx)
	if !errors.Is(err, context.Canceled) {
		e.t.Fatalf("append with a cancelled context: %v, want context.Canceled", err)
	}
	_, err = st.Fetch(ctx, 0, stream.NoEnd, 0)
	e.wantErr("Fetch with a cancelled context", err, context.Canceled)
	e.wantErr("Trim with a cancelled context", st.Trim(ctx, 1), context.Canceled)
	_, err = s.Open(ctx, name, stream.OpenOptions{Epoch: 2})
	e.wantErr("Open with a cancelled context", err, context.Canceled)
	_, err = s.List(ctx, e.prefix)
	e.wantErr("List with a cancelled context", err, context.Canceled)
	e.wantErr("Create with a cancelled context", s.Create(ctx, e.name("other")), context.Canceled)
	// The session was not fenced by the cancelled Open, and the cancelled
	// append used no offset.
	a := e.appendOK(st, batch("cc", 6, 50))
	if a.Base != endOf(acks) {
		e.t.Fatalf("append after a cancelled append at %d, want %d (the cancelled one used an offset)", a.Base, endOf(acks))
	}
	// A cancelled Trim(1) may or may not have landed; it can only have
	// dropped the first batch, [0,1).
	log := e.readAll(st)
	if n := len(log); n != len(acks)+1 && n != len(acks) {
		e.t.Fatalf("log holds %d batches, want %d", n, len(acks)+1)
	}
	e.checkHolds("after cancelled calls", log, append(slices.Clone(acks[1:]), a))
}

func caseUseAfterClose(e *env) {
	s := e.store()
	name := e.name("s")
	st := e.open(s, name, 1)
	acks := e.appendMany(st, "uac", 5, 50)
	if err := st.Close(); err != nil {
		e.t.Fatalf("close stream: %v", err)
	}
	_, err := stream.Append(e.ctx, st, batch("uac", 9, 10))
	e.wantErr("Append on a closed stream", err, stream.ErrClosed)
	_, err = st.Fetch(e.ctx, 0, stream.NoEnd, 0)
	e.wantErr("Fetch on a closed stream", err, stream.ErrClosed)
	e.wantErr("Trim on a closed stream", st.Trim(e.ctx, 1), stream.ErrClosed)

	var other *stream.Store
	if e.h.Second != nil {
		other = e.second(s)
	}
	if err := s.Close(); err != nil {
		e.t.Fatalf("close store: %v", err)
	}
	e.wantErr("Create on a closed store", s.Create(e.ctx, e.name("x")), stream.ErrClosed)
	_, err = s.Open(e.ctx, name, stream.OpenOptions{Epoch: 2})
	e.wantErr("Open on a closed store", err, stream.ErrClosed)
	_, err = s.List(e.ctx, "")
	e.wantErr("List on a closed store", err, stream.ErrClosed)
	e.wantErr("Delete on a closed store", s.Delete(e.ctx, name), stream.ErrClosed)
	if other != nil {
		st2 := e.open(other, name, 2)
		e.intact("stream read from a second store after the first closed", st2, acks)
	}
}
