package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// TestErrorMappingRoundTrip: every sentinel, wrapped with a message,
// survives toStatus/fromStatus and errorToProto/errorFromProto.
func TestErrorMappingRoundTrip(t *testing.T) {
	for _, s := range append(append([]error{}, stream.Sentinels...), context.Canceled, context.DeadlineExceeded) {
		orig := fmt.Errorf("stream %q offset 7: %w", "a/b", s)
		for name, got := range map[string]error{
			"status": fromStatus(context.Background(), "call", toStatus(orig)),
			"proto":  errorFromProto(errorToProto(orig)),
		} {
			if !errors.Is(got, s) {
				t.Errorf("%s: %v does not match %v", name, got, s)
			}
			if got.Error() != orig.Error() {
				t.Errorf("%s: message %q, want %q", name, got, orig)
			}
			if stream.Sentinel(s) != nil && stream.Sentinel(got) != s {
				t.Errorf("%s: Sentinel(%v) = %v", name, got, stream.Sentinel(got))
			}
		}
	}
	// An error that is no sentinel crosses as UNKNOWN and comes back as
	// ErrUnavailable with its text.
	got := fromStatus(context.Background(), "call", toStatus(errors.New("disk on fire")))
	if !errors.Is(got, stream.ErrUnavailable) || !bytes.Contains([]byte(got.Error()), []byte("disk on fire")) {
		t.Fatalf("unknown error: %v", got)
	}
	// Transport failures without a reason.
	for code, want := range map[codes.Code]error{
		codes.Unavailable:       stream.ErrUnavailable,
		codes.Internal:          stream.ErrCorrupt,
		codes.ResourceExhausted: stream.ErrCorrupt,
		codes.Unimplemented:     stream.ErrUnavailable,
	} {
		if got := fromStatus(context.Background(), "call", status.Error(code, "x")); !errors.Is(got, want) {
			t.Errorf("code %v: %v, want %v", code, got, want)
		}
	}
}

// FuzzErrorMapping: any reason, message and code decode without panicking
// into an error that matches exactly one contract sentinel (or a context
// error), keeping the driver's message.
func FuzzErrorMapping(f *testing.F) {
	for _, k := range errorKinds {
		f.Add(k.reason, "msg", uint32(k.code))
	}
	f.Add("", "", uint32(0))
	f.Add("NOPE", "\xff", uint32(99))
	f.Fuzz(func(t *testing.T, reason, msg string, code uint32) {
		e := errorFromProto(&streamv1.Error{Reason: reason, Message: msg})
		if e == nil {
			t.Fatal("nil error")
		}
		k := kindByReason(reason)
		if k != nil && !errors.Is(e, k.err) {
			t.Fatalf("reason %q: %v does not match %v", reason, e, k.err)
		}
		if k == nil && !errors.Is(e, stream.ErrUnavailable) {
			t.Fatalf("unknown reason %q: %v is not ErrUnavailable", reason, e)
		}
		if msg != "" && !bytes.Contains([]byte(e.Error()), []byte(msg)) {
			t.Fatalf("message %q lost: %q", msg, e)
		}
		if stream.Sentinel(e) == nil && !errors.Is(e, context.Canceled) && !errors.Is(e, context.DeadlineExceeded) {
			t.Fatalf("%v matches no sentinel", e)
		}
		if code == 0 {
			return // status OK is no error
		}
		se := fromStatus(context.Background(), "call", status.Error(codes.Code(code), msg))
		if stream.Sentinel(se) == nil && !errors.Is(se, context.Canceled) && !errors.Is(se, context.DeadlineExceeded) {
			t.Fatalf("status %d: %v matches no sentinel", code, se)
		}
	})
}

// FuzzFetchChunks: arbitrary bytes from a driver, decoded as fetch chunks,
// either fail (ErrCorrupt) or give batches that satisfy the contract:
// checksums match, offsets contiguous from a batch covering start.
func FuzzFetchChunks(f *testing.F) {
	good := &streamv1.FetchResponse{StartOffset: 0, NextOffset: 5, Batches: []*streamv1.Batch{
		batchToProto(&stream.Batch{BaseOffset: 0, Count: 2, Payload: []byte("ab"), Properties: map[string]string{"k": "v"}}, stream.Checksum([]byte("ab"))),
		batchToProto(&stream.Batch{BaseOffset: 2, Count: 3, Payload: []byte("cde")}, stream.Checksum([]byte("cde"))),
	}}
	gb, _ := proto.Marshal(good)
	f.Add(gb, []byte{}, int64(0), int64(5))
	f.Add(gb, gb, int64(1), int64(3))
	f.Add(gb[:len(gb)-1], []byte{0xff}, int64(0), int64(100))
	f.Fuzz(func(t *testing.T, c1, c2 []byte, start, end int64) {
		a := newFetchAssembler("fuzz", start, end, 1<<20)
		for _, c := range [][]byte{c1, c2} {
			var resp streamv1.FetchResponse
			if err := proto.Unmarshal(c, &resp); err != nil {
				return // gRPC turns this into codes.Internal, i.e. ErrCorrupt
			}
			if err := a.add(&resp); err != nil {
				if !errors.Is(err, stream.ErrCorrupt) {
					t.Fatalf("add: %v is not ErrCorrupt", err)
				}
				return
			}
		}
		batches, err := a.finish()
		if err != nil {
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("finish: %v is not ErrCorrupt", err)
			}
			return
		}
		next := start
		for i, b := range batches {
			if b.Count == 0 {
				t.Fatalf("batch %d: count 0", i)
			}
			if i == 0 && (b.BaseOffset > start || b.EndOffset() <= start) {
				t.Fatalf("first batch [%d,%d) does not cover %d", b.BaseOffset, b.EndOffset(), start)
			}
			if i > 0 && b.BaseOffset != next {
				t.Fatalf("batch %d at %d, want %d", i, b.BaseOffset, next)
			}
			if b.BaseOffset >= end {
				t.Fatalf("batch %d at %d beyond end %d", i, b.BaseOffset, end)
			}
			next = b.EndOffset()
		}
	})
}

// FuzzEncodeBatchField: the host's hand-assembled AppendRequest (a session
// field followed by pre-encoded batch fields) decodes with the standard
// protobuf decoder into exactly the batches that were appended.
func FuzzEncodeBatchField(f *testing.F) {
	f.Add(uint64(1), []byte("payload"), uint32(1), int64(5), "k", "v", 3)
	f.Add(uint64(0), []byte{}, uint32(0), int64(-1), "", "", 1)
	f.Fuzz(func(t *testing.T, session uint64, p []byte, count uint32, ts int64, k, v string, n int) {
		n = n%8 + 1
		if n < 1 {
			n += 8
		}
		b := stream.Batch{Count: count, Timestamp: ts, Payload: p}
		if k != "" {
			b.Properties = map[string]string{k: v}
		}
		var buf []byte
		buf = append(buf, encodeSessionField(session)...)
		for i := 0; i < n; i++ {
			field, n, err := encodeBatchBuffer(batchToProto(&b, stream.Checksum(p)))
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if n != field.Len() {
				t.Fatalf("encoded length %d, buffer holds %d", n, field.Len())
			}
			buf = append(buf, field.ReadOnlyData()...)
			field.Free()
		}
		var req streamv1.AppendRequest
		if err := proto.Unmarshal(buf, &req); err != nil {
			t.Fatalf("hand-assembled request does not decode: %v", err)
		}
		if req.GetSession() != session || len(req.GetBatches()) != n {
			t.Fatalf("session %d batches %d, want %d and %d", req.GetSession(), len(req.GetBatches()), session, n)
		}
		for _, pb := range req.GetBatches() {
			got, err := batchFromProto(pb, "fuzz")
			if err != nil {
				t.Fatal(err)
			}
			if got.Count != count || got.Timestamp != ts || !bytes.Equal(got.Payload, p) || len(got.Properties) != len(b.Properties) || got.Properties[k] != b.Properties[k] {
				t.Fatalf("batch changed: %+v, want %+v", got, b)
			}
		}
	})
}

// FuzzDecodeAppendRequest: the driver's hand decoder of AppendRequest agrees
// with the protobuf decoder on every input the latter accepts, and refuses
// what it refuses except for what protobuf checks beyond the wire format.
func FuzzDecodeAppendRequest(f *testing.F) {
	req := &streamv1.AppendRequest{Session: 7, Batches: []*streamv1.Batch{
		{Count: 2, Timestamp: -3, Payload: []byte("abc"), Crc32C: 99, Properties: []*streamv1.Property{{Key: []byte("k"), Value: []byte("v")}}},
		{BaseOffset: 5, Count: 1},
	}}
	enc, _ := proto.Marshal(req)
	f.Add(enc)
	f.Add(enc[:len(enc)-2])
	f.Add([]byte{0x08, 0x96, 0x01, 0x12, 0x00, 0x1a, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want streamv1.AppendRequest
		werr := proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, &want)
		var got streamv1.AppendRequest
		gerr := decodeAppendRequest(b, &got)
		if werr == nil && gerr != nil {
			t.Fatalf("hand decoder refused what protobuf accepts: %v", gerr)
		}
		if werr != nil && gerr == nil {
			t.Fatalf("hand decoder accepted what protobuf refuses: %v", werr)
		}
		if werr == nil && !proto.Equal(&got, &want) {
			t.Fatalf("decoded %v, protobuf says %v", &got, &want)
		}
	})
}

func TestTieredPool(t *testing.T) {
	p := newTieredPool()
	for _, n := range []int{1, 4095, 4096, 4097, 1 << 20, 1<<20 + 1, 256 << 20} {
		bp := p.Get(n)
		if len(*bp) != n || cap(*bp) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*bp), cap(*bp))
		}
		p.Put(bp)
		if bp2 := p.Get(n); len(*bp2) != n {
			t.Fatalf("Get(%d) after Put: len %d", n, len(*bp2))
		}
	}
	if bp := p.Get(256<<20 + 1); len(*bp) != 256<<20+1 {
		t.Fatal("oversized Get")
	}
	foreign := make([]byte, 5000)
	p.Put(&foreign) // not a tier size: dropped, not handed out
	if bp := p.Get(5000); cap(*bp) != 8192 {
		t.Fatalf("Get(5000) cap %d, want 8192", cap(*bp))
	}
}
