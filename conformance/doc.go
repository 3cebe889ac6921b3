// Package conformance is the suite every Strata driver must pass: the Stream
// contract of package stream, checked case by case against a real driver.
//
// A driver author calls Run from the driver's own _test.go with a Harness
// that opens stores on the driver's backend:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			NewStore: func(t conformance.T) *stream.Store { ... },
//			Second:   func(t conformance.T, s stream.Store) stream.Store { ... },
//			Crash:    func(t conformance.T, s stream.Store) stream.Store { ... },
//		})
//	}
//
// Each case runs as the subtest "family/case". The same cases run outside
// `go test` (the `strata conformance` command does so, against an
// out-of-process driver): Cases lists them, and RunCase runs one with its
// own T implementation, a timeout, and panic recovery. RunFunc is that
// runner for any case body, so suites built on the same Harness (the
// SharedLog suite, sharedlog/sharedlogtest) share it. PluginHarness builds
// the Harness for a driver's plugin binary.
//
// Cases skip only for what a driver declares (its stream.Info capabilities,
// or a Harness hook left nil), never because something failed to start.
// Randomised cases take their seed from Harness.Seed or STRATA_SEED and log
// it when they fail.
//
// This package checks the stream contract; it is not a benchmark and not a
// chunked.Storage test (conformance/storagetest checks a Storage alone).
package conformance
