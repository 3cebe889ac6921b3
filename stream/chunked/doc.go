// Package chunked is the engine that implements the stream.Store contract on
// any Storage that can put-if-absent: S3, Azure Blob, HDFS, a POSIX
// directory, memory. A backend implements the small Storage interface; the
// engine adds what every backend would otherwise repeat: chunk chains with
// deterministic names, manifests found without LIST, epoch fencing with
// fence chunks and zombie rejection, group commit, pipelined chunk puts with
// in-order acks, trim with garbage collection, CRC32C on every batch and a
// cache of recent chunks.
//
// The rules R1–R7 that comments in this package cite are defined in
// docs/design.md ("The rules"); the protocol, its object names and its
// proof sketch are in docs/engine.md. This package is not a driver: drivers (drivers/nfs,
// drivers/s3, ...) wrap it with their own Config and Open.
package chunked
