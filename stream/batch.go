package stream

import (
	"fmt"
	"hash/crc32"
)

// Batch is the unit of append and fetch. It occupies Count logical offsets.
type Batch struct {
	// BaseOffset is the first offset of the batch. The stream assigns it:
	// Append ignores it, Fetch fills it in.
	BaseOffset int64
	// Count is the number of logical offsets the batch occupies (>= 1).
	Count uint32
	// Timestamp is a caller-chosen time in milliseconds since the epoch.
	Timestamp int64
	// Properties are small key/value pairs stored with the batch (at most
	// Info.MaxProperties of them).
	Properties map[string]string
	// Payload is opaque to the stream. It is checksummed (CRC32C) end to end.
	Payload []byte
}

// EndOffset is the offset after the batch: BaseOffset + Count.
func (b Batch) EndOffset() int64 { return b.BaseOffset + int64(b.Count) }

// Size is the number of bytes the batch counts for against maxBytes and
// Info.MaxBatchBytes: its payload plus its property keys and values.
func (b Batch) Size() int {
	n := len(b.Payload)
	for k, v := range b.Properties {
		n += len(k) + len(v)
	}
	return n
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C (Castagnoli) of p, the checksum every driver and
// transport uses for payloads.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// UpdateChecksum extends a CRC32C computed so far with p.
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// CheckBatch validates b against the limits in info: it returns an error
// wrapping ErrInvalidArgument for a Count of 0 or a property with an empty
// key, and ErrBatchTooLarge for a batch above MaxBatchBytes or with more than
// MaxProperties properties. Drivers call it before assigning an offset.
func (info Info) CheckBatch(b Batch) error {
	if b.Count == 0 {
		return fmt.Errorf("%w: batch count must be >= 1", ErrInvalidArgument)
	}
	for k := range b.Properties {
		if k == "" {
			return fmt.Errorf("%w: batch property with an empty key", ErrInvalidArgument)
		}
	}
	if info.MaxProperties >= 0 && len(b.Properties) > info.MaxProperties {
		return fmt.Errorf("%w: %d properties, limit %d", ErrBatchTooLarge, len(b.Properties), info.MaxProperties)
	}
	if info.MaxBatchBytes > 0 && b.Size() > info.MaxBatchBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, b.Size(), info.MaxBatchBytes)
	}
	return nil
}
