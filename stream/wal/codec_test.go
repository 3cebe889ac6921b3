package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

func testEntry(base int64, count uint32, payload string, props map[string]string) *entry {
	return &entry{base: base, count: count, ts: base * 10, props: props, payload: []byte(payload), crc: stream.Checksum([]byte(payload))}
}

// TestDataRuns: a run of consecutive virtual batches decodes to the same
// batches at their own offsets, its supplied checksum is the checksum of
// its bytes, and a run that lies (a bad entry checksum, counts that do not
// add up, a truncation, another base) is ErrCorrupt with nothing served.
func TestDataRuns(t *testing.T) {
	inc := id{3}
	es := []*entry{
		testEntry(5, 2, "first", nil),
		testEntry(7, 1, "", map[string]string{"k": "v", "a": ""}),
		testEntry(8, 3, "third batch", nil),
	}
	run := encodeRun(inc, es)
	if run.Count != 6 || !run.PayloadChecksumSet || run.PayloadChecksum != stream.Checksum(run.Payload) {
		t.Fatalf("run: count %d, supplied checksum %08x (set %v), checksum of its bytes %08x", run.Count, run.PayloadChecksum, run.PayloadChecksumSet, stream.Checksum(run.Payload))
	}
	run.BaseOffset = 5
	got, err := decodeData(inc, "s", run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(es) {
		t.Fatalf("%d batches from a run of %d", len(got), len(es))
	}
	for i, e := range es {
		b := got[i]
		if b.BaseOffset != e.base || b.Count != e.count || b.Timestamp != e.ts || string(b.Payload) != string(e.payload) || fmt.Sprint(b.Properties) != fmt.Sprint(e.props) {
			t.Fatalf("batch %d: %+v, want %+v", i, b, e.batch())
		}
	}
	bad := func(what string, b stream.Batch) {
		t.Helper()
		if out, err := decodeData(inc, "s", b, nil); !errors.Is(err, stream.ErrCorrupt) || len(out) != 0 {
			t.Errorf("%s: %d batches, %v; want ErrCorrupt and none", what, len(out), err)
		}
	}
	flipped := run
	flipped.Payload = append([]byte(nil), run.Payload...)
	flipped.Payload[len(flipped.Payload)-6] ^= 1 // in the last payload
	bad("a flipped payload byte", flipped)
	miscounted := run
	miscounted.Count = 5
	bad("counts that do not add up", miscounted)
	elsewhere := run
	elsewhere.BaseOffset = 6
	bad("a run stored at another offset", elsewhere)
	truncated := run
	truncated.Payload = run.Payload[:len(run.Payload)-1]
	bad("a truncated run", truncated)
	zero := encodeRun(inc, []*entry{testEntry(1, 0, "x", nil)})
	zero.BaseOffset = 1
	bad("a batch of count 0", zero)
	if _, err := decodeData(id{4}, "s", run, nil); !errors.Is(err, stream.ErrCorrupt) {
		t.Errorf("a run of another incarnation: %v; want ErrCorrupt", err)
	}
}

// TestDataBatchOfEarlierVersions: a V.data batch written before runs (one
// virtual batch, "SDB1") is still served.
func TestDataBatchOfEarlierVersions(t *testing.T) {
	inc := id{5}
	payload := []byte("old")
	b := append([]byte("SDB1"), inc[:]...)
	b = binary.BigEndian.AppendUint64(b, 9)
	b = appendProps(b, map[string]string{"p": "q"})
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	b = binary.BigEndian.AppendUint32(b, stream.Checksum(payload))
	got, err := decodeData(inc, "s", stream.Batch{BaseOffset: 9, Count: 4, Timestamp: 77, Payload: b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].BaseOffset != 9 || got[0].Count != 4 || got[0].Timestamp != 77 || string(got[0].Payload) != "old" || got[0].Properties["p"] != "q" {
		t.Fatalf("%+v", got)
	}
}

// TestFetchInsideRuns: after a close copies a tail to V.data as runs, a
// fetch from any offset, with any end and byte limit, returns the whole
// virtual batches that overlap the range, at their own offsets, as it did
// from the tail.
func TestFetchInsideRuns(t *testing.T) {
	ctx := context.Background()
	base := memory.New(memory.Config{})
	s := newTestStore(t, base)
	st, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	var want []stream.Batch
	off := int64(0)
	for i := range 40 {
		b := stream.Batch{Count: uint32(1 + i%3), Timestamp: int64(i), Payload: bytes.Repeat([]byte{byte(i)}, 1+i*7)}
		if i%5 == 0 {
			b.Properties = map[string]string{"i": fmt.Sprint(i)}
		}
		r, err := stream.Append(ctx, st, b)
		if err != nil || r.BaseOffset != off {
			t.Fatalf("append %d: %+v, %v", i, r, err)
		}
		b.BaseOffset = off
		want = append(want, b)
		off += int64(b.Count)
	}
	check := func(st stream.DriverStream, from string) {
		t.Helper()
		for start := int64(0); start < off; start++ {
			for _, end := range []int64{start + 1, start + 5, stream.NoEnd} {
				for _, maxBytes := range []int{1, 100, 0} {
					got, err := st.Fetch(ctx, start, end, maxBytes)
					if err != nil {
						t.Fatalf("%s: fetch [%d, %d) max %d: %v", from, start, end, maxBytes, err)
					}
					i := 0
					for want[i].EndOffset() <= start {
						i++
					}
					if len(got) == 0 || (maxBytes == 1 && len(got) != 1) {
						t.Fatalf("%s: fetch [%d, %d) max %d: %d batches", from, start, end, maxBytes, len(got))
					}
					for j, b := range got {
						w := want[i+j]
						if b.BaseOffset != w.BaseOffset || b.Count != w.Count || b.Timestamp != w.Timestamp || !bytes.Equal(b.Payload, w.Payload) || fmt.Sprint(b.Properties) != fmt.Sprint(w.Properties) {
							t.Fatalf("%s: fetch [%d, %d) max %d: batch %d at %d, want the batch at %d", from, start, end, maxBytes, j, b.BaseOffset, w.BaseOffset)
						}
						if b.BaseOffset >= min(end, off) {
							t.Fatalf("%s: fetch [%d, %d): batch at %d past the end", from, start, end, b.BaseOffset)
						}
					}
					if end == stream.NoEnd && maxBytes == 0 && got[len(got)-1].EndOffset() != off {
						t.Fatalf("%s: fetch from %d with no limit ended at %d, want %d", from, start, got[len(got)-1].EndOffset(), off)
					}
				}
			}
		}
	}
	check(st, "tail")
	if err := st.Close(); err != nil { // copies the tail to V.data
		t.Fatal(err)
	}
	d, err := base.Open(ctx, testDataName(t, s, "a"), stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := d.Fetch(ctx, 0, stream.NoEnd, 0)
	d.Close()
	if err != nil || len(runs) != 1 || runs[0].Count != uint32(off) {
		t.Fatalf("V.data holds %d base batches (%v); want the 40 batches in one run of %d offsets", len(runs), err, off)
	}
	st, err = s.Open(ctx, "a", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check(st, "V.data")
}

// TestEncodeWALBatchChecksCopies: encoding a WAL batch checks each entry's
// copy, across copy blocks, against its checksum: matching entries are
// marked checked and the combined checksum is the batch's; an entry whose
// checksum does not match its bytes stays unchecked, the batch's checksum
// is reported untrue, and the batch still decodes to every entry's bytes.
func TestEncodeWALBatchChecksCopies(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16/16+5) // 3 copy blocks and a part
	for _, tc := range []struct {
		name string
		bad  int // the entry whose checksum is wrong, or -1
	}{{"all match", -1}, {"the big one is wrong", 1}, {"a small one is wrong", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			es := []*entry{testEntry(0, 1, "small", nil), testEntry(1, 3, string(big), map[string]string{"k": "v"}), testEntry(4, 1, "", nil)}
			if tc.bad >= 0 {
				es[tc.bad].crc ^= 1
			}
			p, sum, all := encodeWALBatch(id{7}, es)
			if all != (tc.bad < 0) {
				t.Fatalf("all copies checked: %v, want %v", all, tc.bad < 0)
			}
			if tc.bad < 0 && sum != stream.Checksum(p) {
				t.Fatalf("combined checksum %08x, the batch's %08x", sum, stream.Checksum(p))
			}
			for i, e := range es {
				if len(e.payload) > 0 && !aliases(p, e.payload) {
					t.Fatalf("entry %d's payload does not point at its copy in the batch", i)
				}
				if e.checked.Load() != (i != tc.bad) {
					t.Fatalf("entry %d checked: %v, want %v", i, e.checked.Load(), i != tc.bad)
				}
			}
			got, err := decodeWALBatch(id{7}, p)
			if err != nil || len(got) != len(es) {
				t.Fatalf("decode: %d entries, %v", len(got), err)
			}
			for i := range es {
				if !bytes.Equal(got[i].payload, es[i].payload) || got[i].base != es[i].base {
					t.Fatalf("entry %d: base %d, %d bytes; want base %d, %d bytes", i, got[i].base, len(got[i].payload), es[i].base, len(es[i].payload))
				}
			}
		})
	}
}

// aliases says whether q's first byte is one of p's: changing it changes p.
func aliases(p, q []byte) bool {
	before := bytes.Clone(p)
	q[0] ^= 0xff
	changed := !bytes.Equal(before, p)
	q[0] ^= 0xff
	return changed
}
