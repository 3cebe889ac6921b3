package sharedlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/stream"
)

// Error is a failure a Kafka broker would answer with an error code: a batch
// that failed validation, a producer sequence out of order, an offset out of
// range. Code is the Kafka error code; errors.Is matches both the franz-go
// kerr value of the code (errors.Is(err, kerr.CorruptMessage)) and the cause
// (for example stream.ErrFenced), if any.
type Error struct {
	// Code is the Kafka protocol error code (kerr.CorruptMessage.Code, ...).
	Code int16
	// Partition is the partition (Log name) the error is about.
	Partition string
	// Op is the operation that failed ("append", "read", ...).
	Op string
	// Msg says what was wrong, naming offsets and fields.
	Msg string
	// Err is the underlying cause, or nil.
	Err error
}

// Error implements error: "sharedlog: PARTITION: OP: CODE_NAME: msg: cause".
func (e *Error) Error() string {
	s := "sharedlog: "
	if e.Partition != "" {
		s += e.Partition + ": "
	}
	if e.Op != "" {
		s += e.Op + ": "
	}
	s += codeName(e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the kerr error of Code and the cause, so that errors.Is
// matches either.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, 2)
	if k := kerr.ErrorForCode(e.Code); k != nil {
		out = append(out, k)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// Retriable reports whether a client may retry the request as is (the
// code's Kafka retriable flag).
func (e *Error) Retriable() bool {
	var k *kerr.Error
	if errors.As(kerr.ErrorForCode(e.Code), &k) {
		return k.Retriable
	}
	return false
}

func codeName(code int16) string {
	var k *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &k) {
		return k.Message
	}
	return fmt.Sprintf("ERROR_CODE_%d", code)
}

// errorf returns an *Error with code k.
func errorf(k *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: k.Code, Msg: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Kafka error code a broker should answer err with:
// 0 for nil, the Code of an *Error, and for other errors the code their
// stream sentinel maps to (ErrFenced: NOT_LEADER_OR_FOLLOWER, ErrOffsetOutOfRange:
// OFFSET_OUT_OF_RANGE, ErrUnavailable and ErrCorrupt: KAFKA_STORAGE_ERROR,
// ErrBatchTooLarge: MESSAGE_TOO_LARGE, ErrInvalidArgument: INVALID_REQUEST,
// ErrClosed and ErrNotFound: NOT_LEADER_OR_FOLLOWER, a context deadline:
// REQUEST_TIMED_OUT); anything else is UNKNOWN_SERVER_ERROR.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return codeFor(err).Code
}

// codeFor maps a non-*Error error to its kerr value.
func codeFor(err error) *kerr.Error {
	switch {
	case errors.Is(err, stream.ErrFenced), errors.Is(err, stream.ErrClosed), errors.Is(err, stream.ErrNotFound):
		return kerr.NotLeaderForPartition
	case errors.Is(err, stream.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	case errors.Is(err, stream.ErrUnavailable), errors.Is(err, stream.ErrCorrupt):
		return kerr.KafkaStorageError
	case errors.Is(err, stream.ErrBatchTooLarge):
		return kerr.MessageTooLarge
	case errors.Is(err, stream.ErrInvalidArgument):
		return kerr.InvalidRequest
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	}
	return kerr.UnknownServerError
}

// wrapErr turns err from the stream layer into an *Error for partition and
// op, keeping err as the cause. An *Error passes through with Partition and
// Op filled in if empty.
func wrapErr(partition, op string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		c := *e
		if c.Partition == "" {
			c.Partition = partition
		}
		if c.Op == "" {
			c.Op = op
		}
		return &c
	}
	return &Error{Code: codeFor(err).Code, Partition: partition, Op: op, Err: err}
}
