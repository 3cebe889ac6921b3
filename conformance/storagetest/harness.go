// Package storagetest is the conformance suite for a chunked.Storage alone:
// the small interface a backend implements to get the whole Stream contract
// from the engine (stream/chunked). A driver runs it from its own test:
//
//	func TestStorage(t *testing.T) {
//		storagetest.Run(t, storagetest.Harness{
//			Open: func(ctx context.Context, config []byte) (chunked.Storage, error) {
//				return mydriver.OpenStorage(ctx, config)
//			},
//			NewConfig: func(t *testing.T) []byte { ... a fresh, empty namespace ... },
//		})
//	}
//
// It checks put-if-absent atomicity with racing writers in separate OS
// processes (exactly one wins in every trial), range-read edges, Stat,
// idempotent Delete, List order/prefix/after/limit, keys with nested '/',
// the ErrNotFound / ErrAlreadyExists mapping, and concurrent puts within one
// process.
//
// The cross-process races re-execute the test binary (os.Args[0]) with
// -test.run matching the test that called Run and an environment variable
// that turns that process into a racer: Run then reads a config from
// standard input, opens the Storage with Harness.Open, and serves put
// commands until its input closes, instead of running the suite. So call Run
// from its own top-level test function, and make everything that test does
// before Run cheap and safe to repeat in a child process (the child inherits
// the parent's environment, so testbed.Env finds the running backend).
//
// It is not the stream suite (package conformance runs that on a
// stream.Store) and it does not check the engine's protocol.
package storagetest

import (
	"context"
	"testing"

	"github.com/stratastream/strata/stream/chunked"
)

// Harness tells Run how to make the Storage under test.
type Harness struct {
	// Open opens a Storage on the namespace that config describes. Run calls
	// it in the test process and, for the cross-process races, in child
	// processes that get nothing but config: Open must work from config
	// alone. Required.
	Open func(ctx context.Context, config []byte) (chunked.Storage, error)

	// NewConfig returns the config of a fresh, empty namespace (a new
	// directory, bucket prefix, container prefix) that no other test uses;
	// it may register t.Cleanup to remove it. Run calls it once per
	// subtest. Required.
	NewConfig func(t *testing.T) []byte

	// Racers is how many OS processes race in each put-if-absent trial
	// (default 4).
	Racers int

	// Trials is how many put-if-absent races the racer processes run
	// (default 60).
	Trials int

	// Goroutines is how many goroutines race within one process in the
	// in-process cases (default 16).
	Goroutines int

	// MaxObjectBytes is the size of the largest object the suite writes
	// (default 1 MiB).
	MaxObjectBytes int
}

func (h Harness) withDefaults() Harness {
	if h.Racers <= 0 {
		h.Racers = 4
	}
	if h.Trials <= 0 {
		h.Trials = 60
	}
	if h.Goroutines <= 0 {
		h.Goroutines = 16
	}
	if h.MaxObjectBytes <= 0 {
		h.MaxObjectBytes = 1 << 20
	}
	return h
}
