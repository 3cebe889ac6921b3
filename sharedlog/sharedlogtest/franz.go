package sharedlogtest

import (
	"embed"
	"strings"
)

//go:embed testdata/franz/*.batch
var franzFS embed.FS

// Sample is a record batch produced by a real Kafka client (franz-go's kgo,
// see TestFranzSamples, which regenerates them with -update).
type Sample struct {
	// Name says what it is: plain, idempotent, gzip, snappy, lz4, zstd,
	// transactional, transactional-zstd.
	Name string
	// Batch is the batch as the client sent it (base offset 0).
	Batch []byte
}

// FranzSamples returns the committed franz-go batches, each a fresh copy.
func FranzSamples() []Sample {
	ents, err := franzFS.ReadDir("testdata/franz")
	if err != nil {
		panic("sharedlogtest: embedded samples: " + err.Error())
	}
	var out []Sample
	for _, e := range ents {
		b, err := franzFS.ReadFile("testdata/franz/" + e.Name())
		if err != nil {
			panic("sharedlogtest: embedded samples: " + err.Error())
		}
		out = append(out, Sample{Name: strings.TrimSuffix(e.Name(), ".batch"), Batch: b})
	}
	return out
}
