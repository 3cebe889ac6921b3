// Package trusted lets the project's own layers tell a store in the same
// process that the payload checksum a batch comes with
// (stream.Batch.PayloadChecksum) was taken from its bytes, so the store
// need not read them again to check it. A driver verifies a supplied
// checksum because a wrong one would be written as the batch's own; that
// costs a pass over every byte, which the write-ahead layer (stream/wal)
// has already made over the same bytes while they were in the CPU's
// caches. The mark lives in a context, so it never crosses a process
// (a plugin's store checks as before), and only this module can set it.
package trusted

import "context"

type checksumKey struct{}

// WithChecksum marks ctx: the payload checksum supplied with the batch
// appended under it is its bytes'.
func WithChecksum(ctx context.Context) context.Context {
	return context.WithValue(ctx, checksumKey{}, true)
}

// Checksum reports whether ctx carries WithChecksum's mark.
func Checksum(ctx context.Context) bool {
	v, _ := ctx.Value(checksumKey{}).(bool)
	return v
}
