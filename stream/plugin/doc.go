// Package plugin runs Strata drivers out of process: a driver binary serves
// a stream.Store over gRPC, and a host uses it as an ordinary stream.Store.
//
// A driver binary's main is one line:
//
//	func main() { plugin.Serve(memory.Open) }
//
// A host loads it with Open (one Store, whose Close stops the process), or
// with Start and then Client.OpenStore (several Stores on one process):
//
//	st, err := plugin.Open(ctx, "/usr/lib/strata/strata-driver-s3", config,
//		plugin.WithSHA256(sum), plugin.WithLogger(logger))
//	defer plugin.CleanupClients() // on host shutdown
//
// The transport is hashicorp/go-plugin with gRPC only, automatic mutual TLS,
// Strata's own handshake cookie and protocol version 1 (negotiated, so a
// protocol 2 can be added beside it). The driver's config (which may hold
// secrets) travels in the OpenStore call, never in argv or the environment.
// Appends are pipelined on one bidirectional stream per session (several
// batches per message, acks in order), fetches arrive in chunks, and both
// run on a private socket pair the host hands the driver (the data channel)
// when the driver serves it. Payloads are checksummed (CRC32C) end to end:
// the host sends the checksum the caller supplied with a batch
// (stream.Batch.PayloadChecksum) or computes it, the driver verifies it and
// hands the verified checksum to its Store, which then need not compute it.
// Every stream sentinel error crosses the boundary: errors.Is works on the
// host and the driver's message is kept. A driver process that dies fails
// every pending and later call with stream.ErrUnavailable naming its exit;
// a driver exits when its host dies. Driver logs written with log/slog
// reach the host's slog.Logger.
//
// The wire protocol is proto/strata/stream/v1/stream.proto, described with
// its rules in docs/protocol.md, so drivers can be written in other
// languages. This package is not a general RPC layer and holds no driver:
// drivers live under drivers/.
package plugin
