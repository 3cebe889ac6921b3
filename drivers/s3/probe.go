package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratastream/strata/internal/redact"
	"github.com/stratastream/strata/stream"
)

// probeKey is read at open and never written: its object name lacks
// keySuffix, so no Storage key maps to it.
const probeKey = ".strata-probe"

// probe GETs probeKey once (with retries for transient trouble) and turns
// the answer into an error that names the setting to fix. 404 NoSuchKey
// is the healthy answer: endpoint reachable, credentials accepted, bucket
// present, s3:GetObject and s3:ListBucket granted.
//
// The probe's whole budget, retries included, is the smaller of
// timeouts.operation and 3 × timeouts.connect (15s by default): a
// reachable service answers it in milliseconds, and an open should not
// hang on an endpoint that accepts connections but never answers.
func (s *Storage) probe(ctx context.Context) error {
	budget := min(s.cfg.Timeouts.Operation, 3*s.cfg.Timeouts.Connect)
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	okey := s.cfg.Prefix + probeKey
	err := s.run(ctx, "GET (open probe)", probeKey, func(ctx context.Context) error {
		s.stats.gets.Add(1)
		resp, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &okey})
		if err == nil {
			resp.Body.Close()
		}
		return err
	}, false)
	if err == nil || (errors.Is(err, stream.ErrNotFound)) {
		return nil
	}
	where := redact.URL(s.cfg.Endpoint)
	if where == "" {
		where = "AWS S3 in region " + s.cfg.Region
	}
	bad := func(setting, format string, args ...any) error {
		return fmt.Errorf("%w: s3: open bucket %q at %s: %s: %s: %v", stream.ErrInvalidArgument, s.cfg.Bucket, where, setting, fmt.Sprintf(format, args...), err)
	}
	switch code := apiCode(err); {
	case code == "NoSuchBucket":
		return bad("bucket", "no bucket %q", s.cfg.Bucket)
	case code == "InvalidAccessKeyId":
		return bad("credentials.access_key_id", "the service does not know this access key")
	case code == "SignatureDoesNotMatch":
		return bad("credentials.secret_access_key", "the signature did not match (wrong secret key)")
	case code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect" || httpStatus(err) == http.StatusMovedPermanently:
		return bad("region", "the bucket is not in region %q", s.cfg.Region)
	case code == "AccessDenied" || httpStatus(err) == http.StatusForbidden:
		return bad("credentials", "access denied (the driver needs s3:GetObject, s3:PutObject, s3:DeleteObject and s3:ListBucket)")
	case httpStatus(err) == 0:
		return fmt.Errorf("s3: open bucket %q: endpoint %s unreachable within %v (check endpoint; timeouts.connect %v, timeouts.request %v): %w",
			s.cfg.Bucket, where, budget, s.cfg.Timeouts.Connect, s.cfg.Timeouts.Request, err)
	}
	return fmt.Errorf("s3: open bucket %q at %s: probe failed: %w", s.cfg.Bucket, where, err)
}
