package sharedlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
)

// xerialMagic starts a snappy payload framed the way the Java client's
// snappy stream frames it (then version and compatible version, int32 each,
// then blocks: int32 length, raw snappy block).
var xerialMagic = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

var (
	zstdOnce sync.Once
	zstdDec  *zstd.Decoder
	zstdErr  error
)

// decompress returns the records of a compressed batch body (the bytes
// after the header), decompressed with codec, refusing to produce more than
// limit bytes. Faults are CORRUPT_MESSAGE.
func decompress(codec int, src []byte, limit int) ([]byte, error) {
	bad := func(err error) error {
		return errorf(kerr.CorruptMessage, "records compressed with codec %d do not decompress: %v", codec, err)
	}
	var out []byte
	var err error
	switch codec {
	case CompressionGzip:
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(src)); err == nil {
			out, err = readLimited(zr, limit)
		}
	case CompressionLZ4:
		out, err = readLimited(lz4.NewReader(bytes.NewReader(src)), limit)
	case CompressionZstd:
		zstdOnce.Do(func() {
			zstdDec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
		})
		if err = zstdErr; err == nil {
			var fh zstd.Header
			if err = fh.Decode(src); err == nil && fh.HasFCS && fh.FrameContentSize > uint64(limit) {
				err = fmt.Errorf("frame claims %d bytes, limit %d", fh.FrameContentSize, limit)
			}
			if err == nil {
				out, err = zstdDec.DecodeAll(src, nil)
			}
		}
	case CompressionSnappy:
		out, err = unsnappy(src, limit)
	default:
		return nil, errorf(kerr.UnsupportedCompressionType, "compression codec %d", codec)
	}
	if err == nil && len(out) > limit {
		err = fmt.Errorf("more than %d bytes", limit)
	}
	if err != nil {
		return nil, bad(err)
	}
	return out, nil
}

func readLimited(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err == nil && len(out) > limit {
		err = fmt.Errorf("more than %d bytes", limit)
	}
	return out, err
}

// unsnappy decodes a raw snappy block or a xerial-framed sequence of them,
// checking each block's claimed length before allocating it.
func unsnappy(src []byte, limit int) ([]byte, error) {
	block := func(dst, b []byte) ([]byte, error) {
		n, err := s2.DecodedLen(b)
		if err != nil {
			return nil, err
		}
		if n > limit-len(dst) {
			return nil, fmt.Errorf("snappy block claims %d bytes, limit %d", n, limit)
		}
		out, err := s2.Decode(nil, b)
		return append(dst, out...), err
	}
	if !bytes.HasPrefix(src, xerialMagic) {
		return block(nil, src)
	}
	if len(src) < 16 {
		return nil, fmt.Errorf("xerial snappy header of %d bytes", len(src))
	}
	src = src[16:]
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, fmt.Errorf("xerial snappy block length truncated")
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return nil, fmt.Errorf("xerial snappy block of %d bytes, %d left", n, len(src))
		}
		var err error
		if out, err = block(out, src[:n]); err != nil {
			return nil, err
		}
		src = src[n:]
	}
	return out, nil
}

// batchRecords returns the (decompressed) record bytes of a batch whose
// header h was parsed from b.
func batchRecords(b []byte, h BatchHeader, limit int) ([]byte, error) {
	if h.Compression() == CompressionNone {
		return b[BatchHeaderSize:], nil
	}
	return decompress(h.Compression(), b[BatchHeaderSize:], limit)
}
