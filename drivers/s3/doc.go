// Package s3 is the Strata driver for AWS S3 and S3-compatible object
// stores (MinIO, Ceph RGW, ...), built on aws-sdk-go-v2.
//
// The driver is small: Storage implements chunked.Storage (put-if-absent
// with If-None-Match: *, ranged GETs, HEAD, batched deletes, listing for
// recovery and GC only) and the chunked engine supplies the whole Stream
// contract on top of it. Open parses a Config (YAML, JSON or an s3:// URL),
// probes the bucket so bad settings fail at once, and returns the engine's
// stream.Store. Every request is counted (Storage.RequestStats), so cost
// per GiB can be computed.
//
// It is not a general S3 client: it reads and writes only objects under
// its own prefix, in the layout the engine defines (docs/drivers/s3.md).
package s3
