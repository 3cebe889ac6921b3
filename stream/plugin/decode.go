package plugin

import (
	"errors"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// driverCodec is the driver's gRPC codec: protobuf, except that an
// AppendRequest is decoded by decodeAppendRequest, whose payloads alias the
// received message instead of being copied once more. The message bytes
// are materialized into a fresh slice the batches then own, so a driver may
// keep a payload it is handed.
type driverCodec struct{ proto encoding.CodecV2 }

func (c driverCodec) Name() string { return "proto" }

func (c driverCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c driverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*streamv1.AppendRequest); ok {
		return decodeAppendRequest(data.Materialize(), m)
	}
	return c.proto.Unmarshal(data, v)
}

var errMalformed = errors.New("malformed protobuf message")

// consumeTag is protowire.ConsumeTag that also refuses field numbers
// outside protobuf's valid range, as proto.Unmarshal does.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && !num.IsValid() {
		return 0, 0, -1
	}
	return num, typ, n
}

// decodeAppendRequest decodes the protobuf encoding of an AppendRequest into
// m (which it resets), as proto.Unmarshal would, except that payloads,
// property keys and values alias b. Unknown fields, and known fields with an
// unexpected wire type, are skipped (protobuf keeps them as unknown fields;
// nothing here reads those).
func decodeAppendRequest(b []byte, m *streamv1.AppendRequest) error {
	m.Session = 0
	m.Batches = m.Batches[:0]
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errMalformed
			}
			m.Session = v
			b = b[n:]
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errMalformed
			}
			pb := &streamv1.Batch{}
			if err := decodeBatch(v, pb); err != nil {
				return err
			}
			m.Batches = append(m.Batches, pb)
			b = b[n:]
		default:
			var err error
			if b, err = skipField(num, typ, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeBatch decodes a streamv1.Batch the way decodeAppendRequest does.
func decodeBatch(b []byte, m *streamv1.Batch) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && num >= 1 && num <= 3:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errMalformed
			}
			switch num {
			case 1:
				m.BaseOffset = int64(v)
			case 2:
				m.Count = uint32(v)
			case 3:
				m.Timestamp = int64(v)
			}
			b = b[n:]
		case typ == protowire.BytesType && (num == 4 || num == 5):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errMalformed
			}
			if num == 5 {
				m.Payload = v
			} else {
				p := &streamv1.Property{}
				if err := decodeProperty(v, p); err != nil {
					return err
				}
				m.Properties = append(m.Properties, p)
			}
			b = b[n:]
		case num == 6 && typ == protowire.Fixed32Type:
			v, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return errMalformed
			}
			m.Crc32C = v
			b = b[n:]
		default:
			var err error
			if b, err = skipField(num, typ, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeProperty decodes a streamv1.Property.
func decodeProperty(b []byte, m *streamv1.Property) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errMalformed
			}
			if num == 1 {
				m.Key = v
			} else {
				m.Value = v
			}
			b = b[n:]
			continue
		}
		var err error
		if b, err = skipField(num, typ, b); err != nil {
			return err
		}
	}
	return nil
}

// skipField consumes the value of a field the decoder does not use (an
// unknown field, or a known number with an unexpected wire type).
func skipField(num protowire.Number, typ protowire.Type, b []byte) ([]byte, error) {
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return nil, errMalformed
	}
	return b[n:], nil
}
