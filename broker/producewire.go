package broker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Produce request is read field by field from the connection and each
// partition's append starts as soon as its records have arrived, not
// after the whole request: the write-ahead log writes the first
// partitions while the client is still sending the last (a request of
// megabytes takes milliseconds to arrive). The fields and their checks
// are kmsg's (ProduceRequest.ReadFrom, v3–v11); TestReadProduceMatchesKmsg
// holds the two to the same result. A request found malformed part way
// closes the connection, as one found malformed whole does; the
// partitions before the fault have then been appended, as when a
// connection drops after the appends and before the response.

// errFrame is a request frame whose fields do not fit in it.
var errFrame = errors.New("truncated or malformed request")

// frameReader reads the fields of one request frame from a connection,
// never past the frame's end. The first error sticks: later reads return
// zero values.
type frameReader struct {
	r      *bufio.Reader
	left   int // bytes of the frame not yet read
	budget *byteBudget
	err    error // errFrame (malformed), or the connection's read error
	buf    [4]byte
}

// fail keeps the first error. The frame's size prefix was read, so a
// connection that ends before the frame does is cut short, not closed
// between requests.
func (f *frameReader) fail(err error) {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if f.err == nil {
		f.err = err
	}
}

// take reads the next n bytes of the frame into f.buf (n ≤ 4).
func (f *frameReader) take(n int) []byte {
	if f.err != nil {
		return nil
	}
	if n > f.left {
		f.fail(errFrame)
		return nil
	}
	if _, err := io.ReadFull(f.r, f.buf[:n]); err != nil {
		f.fail(err)
		return nil
	}
	f.left -= n
	return f.buf[:n]
}

func (f *frameReader) int16() int16 {
	if b := f.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (f *frameReader) int32() int32 {
	if b := f.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

// uvarint reads an unsigned varint of at most 32 bits (five bytes, the
// last at most 0x0f), as kbin does.
func (f *frameReader) uvarint() uint32 {
	var v uint32
	for shift := 0; shift < 28; shift += 7 {
		b := f.take(1)
		if b == nil {
			return 0
		}
		v |= uint32(b[0]&0x7f) << shift
		if b[0] < 0x80 {
			return v
		}
	}
	b := f.take(1)
	if b == nil {
		return 0
	}
	if b[0] > 0x0f {
		f.fail(errFrame)
		return 0
	}
	return v | uint32(b[0])<<28
}

// length reads a length: int16 or int32 (size 2 or 4), or, in flexible
// versions, a uvarint of the length plus one. Negative means null.
func (f *frameReader) length(flexible bool, size int) int {
	switch {
	case flexible:
		return int(f.uvarint()) - 1
	case size == 2:
		return int(f.int16())
	}
	return int(f.int32())
}

// bytes reads n bytes of the frame into a buffer of their own: of a
// pooled size and within the body budget, one from the body pools
// (bodypool.go), else allocated as readBody does (as they arrive, past the
// body budget).
func (f *frameReader) bytes(n int) []byte {
	if f.err != nil {
		return nil
	}
	if n < 0 || n > f.left {
		f.fail(errFrame)
		return nil
	}
	var b []byte
	var err error
	if bodyClass(n) >= 0 && f.budget.tryAcquire(int64(n)) {
		b = getBody(n)
		_, err = io.ReadFull(f.r, b)
		f.budget.release(int64(n))
		if err != nil {
			putBody(b)
		}
	} else {
		b, err = readBody(f.r, n, f.budget)
	}
	if err != nil {
		f.fail(err)
		return nil
	}
	f.left -= n
	return b
}

// skip discards n bytes of the frame.
func (f *frameReader) skip(n int) {
	if f.err != nil {
		return
	}
	if n < 0 || n > f.left {
		f.fail(errFrame)
		return
	}
	if _, err := f.r.Discard(n); err != nil {
		f.fail(err)
		return
	}
	f.left -= n
}

// string reads a string; null is an error unless nullable.
func (f *frameReader) string(flexible, nullable bool) *string {
	n := f.length(flexible, 2)
	if n < 0 {
		if !nullable {
			f.fail(errFrame)
		}
		return nil
	}
	s := string(f.bytes(n))
	return &s
}

// arrayLen reads an array's length (null is empty), at most what the
// frame's remaining bytes can hold at min bytes an element. Like kbin,
// a flexible length is 32 bits wide.
func (f *frameReader) arrayLen(flexible bool, min int) int {
	var n int32
	if flexible {
		n = int32(f.uvarint()) - 1
	} else {
		n = f.int32()
	}
	if int64(n)*int64(min) > int64(f.left) {
		f.fail(errFrame)
		return 0
	}
	return int(max(n, 0))
}

// tags skips a flexible struct's tagged fields.
func (f *frameReader) tags() {
	n := f.uvarint()
	for i := uint32(0); i < n && f.err == nil; i++ {
		f.uvarint()
		f.skip(int(f.uvarint()))
	}
}

// produceWire reports whether a frame whose first bytes are hdr (key and
// version) is a Produce request that readProduce reads.
func (cc *conn) produceWire(hdr []byte) bool {
	key := int16(binary.BigEndian.Uint16(hdr))
	ver := int16(binary.BigEndian.Uint16(hdr[2:]))
	vr := supported[kmsg.Produce.Int16()]
	// With ACLs on, a request's topics are authorized before any is
	// handled (authz.check): the whole request is read first.
	return key == kmsg.Produce.Int16() && ver >= vr.min && ver <= vr.max && cc.b.acls == nil
}

// produceParts receives a Produce request as parseProduce reads it.
type produceParts struct {
	// begin gets the header and the request's fields before its topics
	// (req.Topics empty).
	begin func(req *kmsg.ProduceRequest, corr int32, clientID *string)
	// topic starts a topic of n partitions, partition gets its i-th once
	// its records (nil: null) have arrived.
	topic     func(name string, n int)
	partition func(i int, partition int32, records []byte)
}

// parseProduce reads a Produce request frame from f (its size prefix
// read), v3–v11, handing it to to as it arrives. A malformed frame
// returns errFrame; a connection that fails or times out its read error.
func parseProduce(f *frameReader, to produceParts) error {
	f.int16() // api key
	req := kmsg.NewPtrProduceRequest()
	req.Version = f.int16()
	corr := f.int32()
	clientID := f.string(false, true)
	flexible := req.IsFlexible()
	if flexible {
		f.tags()
	}
	req.TransactionID = f.string(flexible, true)
	req.Acks = f.int16()
	req.TimeoutMillis = f.int32()
	if f.err != nil {
		return f.err
	}
	to.begin(req, corr, clientID)
	topics := f.arrayLen(flexible, 2)
	for range topics {
		name := f.string(flexible, false)
		n := f.arrayLen(flexible, 6)
		if f.err != nil {
			return f.err
		}
		to.topic(*name, n)
		for i := range n {
			partition := f.int32()
			var records []byte // null: kmsg's nil
			if n := f.length(flexible, 4); n >= 0 {
				records = f.bytes(n)
			}
			if flexible {
				f.tags()
			}
			if f.err != nil {
				return f.err
			}
			to.partition(i, partition, records)
		}
		if flexible {
			f.tags()
		}
	}
	if flexible {
		f.tags()
	}
	f.skip(f.left) // kmsg ignores bytes past the request
	return f.err
}

// readProduce reads a Produce request frame of size bytes (produceWire
// said it is one), starting each partition's append once its records
// have arrived, and starts handling it. A malformed frame returns
// errFrame; a connection that fails or times out its read error.
func (cc *conn) readProduce(r *bufio.Reader, size int) (*pending, error) {
	var (
		p     *pending
		pr    *produceReq
		name  string
		parts []kmsg.ProduceResponseTopicPartition
	)
	err := parseProduce(&frameReader{r: r, left: size, budget: cc.b.bodyMem}, produceParts{
		begin: func(req *kmsg.ProduceRequest, corr int32, clientID *string) {
			if clientID != nil && cc.clientID == "" {
				cc.clientID = *clientID
			}
			resp := req.ResponseKind().(*kmsg.ProduceResponse)
			resp.SetVersion(req.Version)
			p = &pending{done: make(chan struct{}), corr: corr, key: req.Key(), start: time.Now(), header: resp.IsFlexible()}
			pr = cc.b.newProduce(req, resp)
			pr.recycle = true // each partition's records are a buffer of their own
		},
		topic: func(topic string, n int) { name, parts = topic, pr.topic(topic, n) },
		partition: func(i int, partition int32, records []byte) {
			pr.partition(name, &parts[i], partition, records)
		},
	})
	if err != nil {
		if errors.Is(err, errFrame) {
			return nil, fmt.Errorf("reading a Produce request: %w", err)
		}
		return nil, err
	}
	finish := pr.finish()
	go func() {
		defer close(p.done)
		p.resp = finish()
	}()
	return p, nil
}
