package stream

import "fmt"

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
	// PayloadChecksum, when PayloadChecksumSet, is the caller's
	// Checksum(Payload), supplied to Append so that the driver need not
	// read the payload a second time to checksum it (a caller that has
	// just verified or computed a checksum over the same bytes, such as
	// sharedlog with a Kafka batch CRC, gets it for a CombineChecksum).
	// A driver may store it in place of computing its own. It must never
	// return wrong bytes because of it: if the supplied checksum does not
	// match the payload, either the Append fails with ErrCorrupt and
	// nothing is stored, or the batch is stored and every Fetch covering
	// it fails with ErrCorrupt (as may fetches of batches stored with it
	// in one backend object: a wrong checksum corrupts the caller's own
	// stream, never another's). A driver that computes its own checksum
	// anyway compares the two. Only Append reads these two fields; Fetch
	// returns batches with them unset.
	PayloadChecksum uint32
	// PayloadChecksumSet says PayloadChecksum is supplied (zero is a valid
	// CRC32C).
	PayloadChecksumSet bool
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

// CheckBatch validates b against the limits in info: it returns an error
// wrapping ErrInvalidArgument for a Count of 0 or a property with an empty
// key, and ErrBatchTooLarge for a batch above MaxBatchBytes or with more than
// MaxProperties properties. Drivers call it before assigning an offset.
func (info Info) CheckBatch(b Batch) error {
	return info.checkBatch(b, len(b.Payload))
}

// checkBatch is CheckBatch of b with a payload of n bytes.
func (info Info) checkBatch(b Batch, n int) error {
	size := b.Size() - len(b.Payload) + n
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
	if info.MaxBatchBytes > 0 && size > info.MaxBatchBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, size, info.MaxBatchBytes)
	}
	return nil
}
