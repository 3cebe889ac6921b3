// Package sharedlog is a Kafka partition log on Strata streams: KIP-1183's
// SharedLog. A Log keeps one partition on any stream.Store (a data stream of
// Kafka record batches whose stream offsets are the Kafka offsets, and a
// metadata stream of checkpoints and leader-epoch records) and gives a
// broker what its Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
// DeleteRecords and WriteTxnMarkers handlers need:
//
//   - record batch validation (magic v2: lengths, CRC32C, counts, record
//     framing, compressed records) with the Kafka error code of each fault
//     (*Error, ErrorCode);
//   - offsets assigned by stamping the base offset and leader epoch into the
//     batch, with pipelined appends acknowledged once durable;
//   - idempotent-producer state (duplicates of the last five batches
//     answered with their offsets, out-of-order sequences and stale epochs
//     rejected), transactions' last stable offset and aborted transactions;
//   - high watermark, log start offset, DeleteRecords, retention by time and
//     size on a background timer;
//   - a sparse time index for offset-by-timestamp lookups and a
//     leader-epoch history for OffsetForLeaderEpoch;
//   - checkpoints of that state, so that a new owner opening with a higher
//     epoch fences the old one and recovers by replaying a bounded tail.
//
// It is not a broker (no wire protocol, consumer groups or transaction
// coordinator) and not a stream driver. docs/sharedlog.md describes the
// layout, the error mapping and how broker handlers map onto the API;
// package sharedlogtest is its conformance suite.
package sharedlog
