package s3

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/stratastream/strata/stream"
)

// run calls try, one HTTP request per call, until it succeeds, fails for
// good, or the retry policy (attempts, Timeouts.Operation) runs out. Each
// try gets its own Timeouts.Request deadline. The result is mapped to the
// contract: 404 -> stream.ErrNotFound, 412 on a conditional put ->
// stream.ErrAlreadyExists, anything else -> stream.ErrUnavailable; the
// message names the operation, object and attempts, and the SDK error stays
// in the chain.
func (s *Storage) run(ctx context.Context, op, key string, try func(context.Context) error, conditional bool) error {
	if s.closed.Load() {
		return fmt.Errorf("s3: %s %s: %w", op, s.uri(key), stream.ErrClosed)
	}
	octx, cancel := context.WithTimeout(ctx, s.cfg.Timeouts.Operation)
	defer cancel()
	var err error
	attempt := 1
	for ; ; attempt++ {
		actx, acancel := context.WithTimeout(octx, s.cfg.Timeouts.Request)
		err = try(actx)
		acancel()
		if err == nil {
			return nil
		}
		if !retryable(err) || attempt >= s.cfg.Retry.MaxAttempts || octx.Err() != nil {
			break
		}
		s.stats.retries.Add(1)
		if !sleep(octx, backoff(s.cfg.Retry, attempt)) {
			break
		}
	}
	sentinel := stream.ErrUnavailable
	switch st := httpStatus(err); {
	case st == http.StatusNotFound && apiCode(err) != "NoSuchBucket":
		return fmt.Errorf("s3: %s %s: %w", op, s.uri(key), stream.ErrNotFound)
	case st == http.StatusPreconditionFailed && conditional:
		return fmt.Errorf("s3: %s %s: %w", op, s.uri(key), stream.ErrAlreadyExists)
	}
	s.stats.errors.Add(1)
	why := ""
	switch {
	case ctx.Err() != nil:
		why = " (caller's context done)"
	case octx.Err() != nil:
		why = fmt.Sprintf(" (timeouts.operation %v exceeded)", s.cfg.Timeouts.Operation)
	case errors.Is(err, context.DeadlineExceeded):
		why = fmt.Sprintf(" (timeouts.request %v exceeded)", s.cfg.Timeouts.Request)
	}
	return fmt.Errorf("s3: %s %s failed after %d attempt(s)%s: %w: %w", op, s.uri(key), attempt, why, sentinel, err)
}

// retryable reports whether a failed request may succeed when repeated:
// no HTTP response at all (network error, request timeout), 5xx
// (including 503 SlowDown), 429, 409 (ConditionalRequestConflict,
// OperationAborted), 408, 499 (MinIO's ClientDisconnected while it shuts
// down) and 400 RequestTimeout.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ke *keyError
	if errors.As(err, &ke) {
		return ke.code == "InternalError" || ke.code == "SlowDown" || ke.code == "ServiceUnavailable"
	}
	switch st := httpStatus(err); {
	case st == 0:
		return true
	case st >= 500, st == http.StatusTooManyRequests, st == http.StatusConflict,
		st == http.StatusRequestTimeout, st == statusClientClosed:
		return true
	}
	switch apiCode(err) {
	case "RequestTimeout", "SlowDown", "RequestTimeTooSkewed":
		return true
	}
	return false
}

// statusClientClosed is the non-standard 499 MinIO answers in-flight
// requests with while it shuts down.
const statusClientClosed = 499

// isConditionalConflict reports a 409 on a conditional write: another
// conditional write to the same key was in progress.
func isConditionalConflict(err error) bool {
	return httpStatus(err) == http.StatusConflict
}

// httpStatus is the HTTP status of a failed request, 0 if none arrived.
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// apiCode is the S3 error code (NoSuchKey, SlowDown, ...), "" if none.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// backoff is the delay before retry number attempt (1-based): exponential
// from BaseDelay, capped at MaxDelay, with full jitter.
func backoff(r Retry, attempt int) time.Duration {
	ceil := r.BaseDelay << min(attempt-1, 20)
	if ceil <= 0 || ceil > r.MaxDelay {
		ceil = r.MaxDelay
	}
	return time.Duration(rand.Int64N(int64(ceil)) + 1)
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
