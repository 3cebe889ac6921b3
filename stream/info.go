package stream

// Info describes a driver: its identity, limits and capabilities. The
// conformance suite reads it to size its cases and to skip what a driver
// declares it does not support.
type Info struct {
	// Driver is the driver's name ("memory", "nfs", "s3", ...).
	Driver string
	// Version is the driver's version string.
	Version string
	// MaxBatchBytes is the largest Batch.Size a driver accepts.
	MaxBatchBytes int
	// MaxProperties is the most properties a batch may carry (0: none).
	MaxProperties int
	// MaxFetchBytes is the default and largest maxBytes of one Fetch.
	MaxFetchBytes int
	// ReadOnlyOpen: the driver supports ModeReadOnly opens.
	ReadOnlyOpen bool
	// Durable: an acknowledged append survives the loss of the driver
	// process and host (false for the memory driver).
	Durable bool
	// SharedNamespace: two Stores opened with the same config, possibly in
	// different processes, see the same streams (false for memory, whose
	// namespace is one process's heap).
	SharedNamespace bool
}

// Default limits used by the project's drivers.
const (
	DefaultMaxBatchBytes = 8 << 20
	DefaultMaxProperties = 64
	DefaultMaxFetchBytes = 64 << 20
)
