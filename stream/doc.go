// Package stream is the Strata Stream contract: the types and rules every
// storage driver implements and every host (a broker, the conformance suite,
// the CLI) programs against.
//
// A Store is one backend namespace. It creates, opens, deletes and lists
// streams. Store and Stream are concrete types, the front door over the
// narrow DriverStore and DriverStream that implementations provide
// (NewStore), as database/sql is over database/sql/driver: names, batch
// limits, contexts, read-only writes and use after Close are checked there,
// once, so that a driver that forgets a check is still safe. A Stream is an append-only sequence of batches; each batch
// occupies Count logical offsets starting at the base offset the stream
// assigns. Offsets start at 0 and never repeat or leave gaps.
//
// Writers open a stream with an epoch. An open fences every older session:
// holders of a lower epoch, and an earlier open of the same epoch. A fenced
// session's later appends and trims fail with ErrFenced. Appends are
// pipelined: Append returns an AppendFuture at once; offsets are assigned in
// call order, futures complete in that order, and a completed future means the
// batch is durable on the backend. If one append fails, every later append
// that was in flight fails too, so an acknowledged log never has a gap.
//
// Errors are the sentinel values of this package (ErrFenced,
// ErrOffsetOutOfRange, ...), matched with errors.Is. Drivers wrap them with
// messages that name the stream, offset and backend object involved; the
// front door adds the stream's name to an error that lacks it.
//
// Two rules complete the error contract: a call whose context is done fails
// with an error matching ctx.Err() (errors.Is(err, context.Canceled) or
// context.DeadlineExceeded); Append and Trim on a read-only session fail with
// ErrInvalidArgument.
//
// Payloads are checksummed with CRC32C (Checksum) end to end. A caller that
// already holds the checksum of a payload may supply it with the batch
// (Batch.PayloadChecksum and PayloadChecksumSet) so that the driver skips
// its own pass over the bytes; CombineChecksum joins checksums of adjacent
// byte ranges without reading them. A supplied checksum never makes a
// driver return wrong bytes: a wrong one fails the Append with ErrCorrupt
// (nothing stored), or the batch is stored and Fetches covering it fail
// with ErrCorrupt.
//
// This package holds no driver and does no I/O. Drivers live under
// drivers/, the out-of-process transport under stream/plugin, and the
// portable engine for object-like stores under stream/chunked.
package stream
