package sharedlog_test

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
)

var writeCorpus = flag.Bool("write-corpus", false, "write the FuzzParseBatch seed corpus to testdata/fuzz")

// fuzzSeeds are the seed inputs: franz-go batches, built batches of every
// kind, and the malformed inputs of the suite.
func fuzzSeeds() [][]byte {
	var out [][]byte
	for _, s := range sharedlogtest.FranzSamples() {
		out = append(out, s.Batch)
	}
	out = append(out,
		sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 3, Timestamp: 1}),
		sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 2, Idempotent: true, ProducerID: 1, BaseSequence: 5}),
		sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1, Transactional: true, ProducerID: 2}),
		sharedlogtest.Build(sharedlogtest.BatchSpec{Marker: sharedlogtest.AbortMarker, ProducerID: 2}),
	)
	for _, b := range sharedlogtest.BadInputs() {
		out = append(out, b.Batch)
	}
	return out
}

// FuzzParseBatch feeds arbitrary bytes to the batch parser: it must never
// panic, must reject with an *Error carrying a Kafka code, and when it
// accepts, the header must agree with the bytes.
func FuzzParseBatch(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := sharedlog.ParseBatch(b)
		if err != nil {
			var e *sharedlog.Error
			if !errors.As(err, &e) || e.Code == 0 {
				t.Fatalf("rejection is not a coded *Error: %v", err)
			}
			return
		}
		if h.Length != len(b) || h.Magic != 2 || h.NumRecords < 1 || int64(h.NumRecords) != h.OffsetCount() {
			t.Fatalf("accepted batch with header %+v for %d bytes", h, len(b))
		}
		if int64(binary.BigEndian.Uint64(b)) != h.BaseOffset {
			t.Fatalf("base offset mismatch")
		}
	})
}

// TestWriteFuzzCorpus writes the seeds as the committed corpus with
// -write-corpus, and otherwise checks the committed corpus is present.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParseBatch")
	if *writeCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range fuzzSeeds() {
			name := fmt.Sprintf("seed-%x", sha256.Sum256(s))[:21]
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) < len(fuzzSeeds())/2 {
		t.Fatalf("committed seed corpus in %s: %d files, %v (regenerate with -write-corpus)", dir, len(ents), err)
	}
}
