// Package drivertest is the test glue the chunked drivers (azure, s3,
// hdfs, nfs) share: building a driver's plugin binary, reading the config
// a testbed wrote, running the conformance suite in process and out of
// process and the chunked.Storage suite, cleaning a test's objects up,
// SIGKILLing a writer process mid-write (KillChild), an endpoint that
// never answers (SilentServer), the append loops, latency and request
// metrics of their benchmarks, and the interleaved comparison of a
// driver's appends with raw loops on its backend (Compare).
//
// It is imported by _test.go files only. It is not a test suite itself:
// the cases live in conformance and conformance/storagetest, and each
// driver keeps what is its own (fresh prefixes or roots, fault hooks,
// backend-specific cases).
package drivertest
