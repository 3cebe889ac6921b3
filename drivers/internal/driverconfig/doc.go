// Package driverconfig holds what the chunked drivers (azure, s3, hdfs,
// nfs) share in their configs and their Open: the Timeouts, Retry and
// Engine sections with their defaults and validation, the strict YAML/JSON
// decode and the URL query form, the mapping of Engine to chunked.Options,
// and the Open sequence (parse, open the Storage, run the chunked engine on
// it, closing the Storage when the engine refuses).
//
// Drivers re-export the section types as aliases (azure.Timeouts is
// driverconfig.Timeouts), so their public API and YAML field names stay
// their own. Errors wrap stream.ErrInvalidArgument and name the driver and
// the bad field.
//
// It is not a config format of its own, nor a registry of drivers: each
// driver still owns its Config struct, its URL scheme, the validation of
// its backend-specific fields, and its Storage.
package driverconfig
