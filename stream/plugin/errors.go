package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// errorDomain is the google.rpc.ErrorInfo domain of Strata's error reasons.
const errorDomain = "strata.stream.v1"

// reasonUnknown is the reason of an error that matches no sentinel.
const reasonUnknown = "UNKNOWN"

// errorKind is one machine-readable error reason: the sentinel (or context
// error) it stands for and the gRPC code that carries it.
type errorKind struct {
	reason string
	err    error
	code   codes.Code
}

// errorKinds is the one table of reasons. Order matters only for matching: an
// error that wraps several sentinels gets the first (stream.Sentinels order,
// then the context errors).
var errorKinds = []errorKind{
	{"FENCED", stream.ErrFenced, codes.FailedPrecondition},
	{"OFFSET_OUT_OF_RANGE", stream.ErrOffsetOutOfRange, codes.OutOfRange},
	{"NOT_FOUND", stream.ErrNotFound, codes.NotFound},
	{"ALREADY_EXISTS", stream.ErrAlreadyExists, codes.AlreadyExists},
	{"CLOSED", stream.ErrClosed, codes.FailedPrecondition},
	{"INVALID_ARGUMENT", stream.ErrInvalidArgument, codes.InvalidArgument},
	{"BATCH_TOO_LARGE", stream.ErrBatchTooLarge, codes.InvalidArgument},
	{"UNAVAILABLE", stream.ErrUnavailable, codes.Unavailable},
	{"CORRUPT", stream.ErrCorrupt, codes.DataLoss},
	{"CANCELED", context.Canceled, codes.Canceled},
	{"DEADLINE_EXCEEDED", context.DeadlineExceeded, codes.DeadlineExceeded},
}

// kindOf returns the error kind err matches, or nil.
func kindOf(err error) *errorKind {
	for i := range errorKinds {
		if errors.Is(err, errorKinds[i].err) {
			return &errorKinds[i]
		}
	}
	return nil
}

// kindByReason returns the error kind with the given reason, or nil.
func kindByReason(reason string) *errorKind {
	for i := range errorKinds {
		if errorKinds[i].reason == reason {
			return &errorKinds[i]
		}
	}
	return nil
}

// remoteError is an error that crossed the plugin boundary: it keeps the
// driver's message verbatim and unwraps to the sentinel (or context error)
// its reason names, so errors.Is works on the host.
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// errorToProto encodes err for an in-stream message (an append ack).
func errorToProto(err error) *streamv1.Error {
	reason := reasonUnknown
	if k := kindOf(err); k != nil {
		reason = k.reason
	}
	return &streamv1.Error{Reason: reason, Message: strings.ToValidUTF8(err.Error(), "\uFFFD")}
}

// errorFromProto decodes an in-stream error. A reason this host does not know
// (or UNKNOWN) becomes ErrUnavailable: the outcome of the call is unknown.
func errorFromProto(e *streamv1.Error) error {
	msg := e.GetMessage()
	k := kindByReason(e.GetReason())
	if k == nil {
		if msg == "" {
			msg = "driver error with no message"
		}
		return fmt.Errorf("%w: driver error (reason %q): %s", stream.ErrUnavailable, e.GetReason(), msg)
	}
	if msg == "" {
		msg = k.err.Error()
	}
	return &remoteError{msg: msg, kind: k.err}
}

// toStatus encodes err as the gRPC status a driver returns: a code, the full
// message and an ErrorInfo naming the reason.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	k := kindOf(err)
	code, reason := codes.Unknown, reasonUnknown
	if k != nil {
		code, reason = k.code, k.reason
	}
	st := status.New(code, strings.ToValidUTF8(err.Error(), "\uFFFD"))
	if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain}); derr == nil {
		st = withInfo
	}
	return st.Err()
}

// fromStatus decodes an error returned by a gRPC call to the driver. what
// names the call and the driver for messages of transport failures.
//
// A status with a Strata ErrorInfo maps back to its sentinel with the
// driver's message kept verbatim. A status without one is a transport
// failure: Internal, ResourceExhausted and DataLoss (a message that could not
// be decoded or was too large) become ErrCorrupt, everything else
// ErrUnavailable. A ctx that has ended wins: its error is returned.
func fromStatus(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%w: %s: %v", stream.ErrUnavailable, what, err)
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != errorDomain {
			continue
		}
		return errorFromProto(&streamv1.Error{Reason: info.GetReason(), Message: st.Message()})
	}
	switch st.Code() {
	case codes.Internal, codes.ResourceExhausted, codes.DataLoss:
		return fmt.Errorf("%w: %s: malformed message from the driver: %s", stream.ErrCorrupt, what, st.Message())
	}
	return fmt.Errorf("%w: %s: %s (%s)", stream.ErrUnavailable, what, st.Message(), st.Code())
}
