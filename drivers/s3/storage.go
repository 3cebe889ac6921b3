package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// Storage is a chunked.Storage on one bucket and prefix of an S3 or
// S3-compatible service. It also reports its requests
// (chunked.StatsReporter). Methods are safe for concurrent use.
type Storage struct {
	cfg    Config // with defaults applied
	client *s3.Client
	conns  connSet // every connection its HTTP client dialed
	stats  counters
	closed atomic.Bool
}

var (
	_ chunked.Storage       = (*Storage)(nil)
	_ chunked.StatsReporter = (*Storage)(nil)
)

// maxDeleteKeys is the most keys one DeleteObjects request may carry.
const maxDeleteKeys = 1000

// OpenStorage connects to the bucket cfg names and probes it with one GET of
// a key that never exists, so that wrong credentials, a missing bucket or
// an unreachable endpoint fail here with an error naming the setting
// (stream.ErrInvalidArgument for settings the service rejected,
// stream.ErrUnavailable when it could not be reached).
func OpenStorage(ctx context.Context, cfg Config) (*Storage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Storage{}
	hc := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = cfg.Timeouts.Connect }).
		WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = 256
			t.MaxIdleConnsPerHost = 128
			t.TLSHandshakeTimeout = cfg.Timeouts.Connect
			t.DialContext = s.conns.dialer(t.DialContext)
		})
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithHTTPClient(hc),
		// Retries are ours (retry.go), so that each attempt is counted and
		// put-if-absent conflicts are resolved as documented.
		awsconfig.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if c := cfg.Credentials; c.AccessKeyID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: s3: loading AWS config (region, credentials): %w", stream.ErrInvalidArgument, err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = DefaultRegion
	}
	cfg.Region = awsCfg.Region
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = cfg.PathStyle
		// Reads are mostly ranged, which carry no object checksum; the
		// engine checks its own CRC32C on every chunk.
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.Logger = logging.Nop{}
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	s.cfg, s.client = cfg, client
	if err := s.probe(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Config returns the storage's configuration with defaults applied and the
// credentials removed.
func (s *Storage) Config() Config {
	c := s.cfg
	c.Credentials = Credentials{}
	return c
}

// objectKey maps a Storage key to its S3 object name: Prefix + key +
// keySuffix. The suffix keeps a key that is a path prefix of another ("a"
// and "a/b") from being both an object and a "directory", which stores
// that keep objects as files (MinIO) cannot list; it sorts below every key
// byte, so object names sort as their keys do.
func (s *Storage) objectKey(key string) string { return s.cfg.Prefix + key + keySuffix }

// keySuffix ends every object name the driver writes. It is outside the
// key alphabet [A-Za-z0-9._/-] and below all of it.
const keySuffix = "!"

// PutIfAbsent creates key with data using PutObject with If-None-Match: *.
// 412 PreconditionFailed is stream.ErrAlreadyExists. 409
// ConditionalRequestConflict (a concurrent conditional write to the same
// key is in progress) is retried with backoff like a 5xx; if the retries
// run out on it, one HEAD resolves the outcome: the key exists ->
// ErrAlreadyExists, absent -> ErrUnavailable. A retry after an attempt
// whose outcome is unknown (timeout, reset connection) may find the
// attempt's own object and report ErrAlreadyExists; the engine tells its
// own object from another writer's by the put id in the chunk header (R1,
// docs/design.md).
func (s *Storage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := s.put(ctx, "PUT-IF-ABSENT", key, data, true)
	if err == nil || !isConditionalConflict(err) {
		return err
	}
	// Retries exhausted on 409: whoever held the key may have won.
	if _, serr := s.Stat(ctx, key); serr == nil {
		return fmt.Errorf("s3: PUT-IF-ABSENT %s: %w (resolved by HEAD after repeated 409 ConditionalRequestConflict)", s.uri(key), stream.ErrAlreadyExists)
	} else if !errors.Is(serr, stream.ErrNotFound) {
		return serr
	}
	return err
}

// Put creates or overwrites key with one PutObject.
func (s *Storage) Put(ctx context.Context, key string, data []byte) error {
	return s.put(ctx, "PUT", key, data, false)
}

func (s *Storage) put(ctx context.Context, op, key string, data []byte, ifAbsent bool) error {
	okey := s.objectKey(key)
	return s.run(ctx, op, key, func(ctx context.Context) error {
		in := &s3.PutObjectInput{
			Bucket:        &s.cfg.Bucket,
			Key:           &okey,
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
		}
		if ifAbsent {
			in.IfNoneMatch = aws.String("*")
		}
		s.stats.puts.Add(1)
		s.stats.bytesWritten.Add(int64(len(data)))
		_, err := s.client.PutObject(ctx, in)
		return err
	}, ifAbsent)
}

// Get reads length bytes of key from off with one ranged GetObject
// (length < 0: to the end). A range starting at or past the end (416)
// returns no bytes; length 0 costs one HEAD.
func (s *Storage) Get(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if off < 0 {
		return nil, fmt.Errorf("%w: s3: GET %s: negative offset %d", stream.ErrInvalidArgument, s.uri(key), off)
	}
	if length == 0 {
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return []byte{}, nil
	}
	okey := s.objectKey(key)
	var out []byte
	err := s.run(ctx, "GET", key, func(ctx context.Context) error {
		in := &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &okey}
		switch {
		case length > 0:
			in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+length-1))
		case off > 0:
			in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
		}
		s.stats.gets.Add(1)
		resp, err := s.client.GetObject(ctx, in)
		if err != nil {
			if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable {
				out = []byte{}
				return nil
			}
			return err
		}
		defer resp.Body.Close()
		buf := bytes.NewBuffer(make([]byte, 0, max(aws.ToInt64(resp.ContentLength), 0)))
		n, err := io.Copy(buf, resp.Body)
		s.stats.bytesRead.Add(n)
		if err != nil {
			return err
		}
		b := buf.Bytes()
		if in.Range != nil && resp.ContentRange == nil {
			// The service ignored the range and sent the whole object.
			b = clip(b, off, length)
		}
		out = b
		return nil
	}, false)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// clip returns b[off:off+length] bounded by len(b); length < 0 means to
// the end.
func clip(b []byte, off, length int64) []byte {
	if off >= int64(len(b)) {
		return []byte{}
	}
	b = b[off:]
	if length >= 0 && length < int64(len(b)) {
		b = b[:length]
	}
	return b
}

// Stat returns the size of key with one HeadObject.
func (s *Storage) Stat(ctx context.Context, key string) (int64, error) {
	okey := s.objectKey(key)
	var size int64
	err := s.run(ctx, "HEAD", key, func(ctx context.Context) error {
		s.stats.heads.Add(1)
		resp, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &okey})
		if err != nil {
			return err
		}
		size = aws.ToInt64(resp.ContentLength)
		return nil
	}, false)
	return size, err
}

// Delete removes keys: one DeleteObject for a single key, else one
// DeleteObjects (quiet mode) per 1000 keys. Absent keys are not an error.
func (s *Storage) Delete(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), maxDeleteKeys)
		batch := keys[:n]
		keys = keys[n:]
		var err error
		if len(batch) == 1 {
			err = s.deleteOne(ctx, batch[0])
		} else {
			err = s.deleteMany(ctx, batch)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Storage) deleteOne(ctx context.Context, key string) error {
	okey := s.objectKey(key)
	err := s.run(ctx, "DELETE", key, func(ctx context.Context) error {
		s.stats.deletes.Add(1)
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: &okey})
		return err
	}, false)
	if errors.Is(err, stream.ErrNotFound) {
		return nil
	}
	return err
}

func (s *Storage) deleteMany(ctx context.Context, keys []string) error {
	objs := make([]types.ObjectIdentifier, len(keys))
	for i, k := range keys {
		objs[i] = types.ObjectIdentifier{Key: aws.String(s.objectKey(k))}
	}
	what := fmt.Sprintf("%s (+%d more)", keys[0], len(keys)-1)
	return s.run(ctx, "DELETE", what, func(ctx context.Context) error {
		s.stats.deletes.Add(1)
		resp, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &s.cfg.Bucket,
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return err
		}
		for _, e := range resp.Errors {
			if aws.ToString(e.Code) == "NoSuchKey" {
				continue
			}
			return &keyError{key: aws.ToString(e.Key), code: aws.ToString(e.Code), msg: aws.ToString(e.Message)}
		}
		return nil
	}, false)
}

// keyError is one key's failure inside a DeleteObjects response.
type keyError struct{ key, code, msg string }

func (e *keyError) Error() string { return fmt.Sprintf("key %s: %s: %s", e.key, e.code, e.msg) }

// List returns the keys under prefix greater than after with
// ListObjectsV2 (one request per 1000 keys). Used by the engine for
// recovery and GC only.
func (s *Storage) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	oprefix := s.cfg.Prefix + prefix
	var startAfter *string
	if after != "" {
		startAfter = aws.String(s.objectKey(after))
	}
	var keys []string
	var token *string
	for {
		want := int32(1000)
		if limit > 0 {
			want = int32(min(limit-len(keys), 1000))
		}
		var resp *s3.ListObjectsV2Output
		err := s.run(ctx, "LIST", prefix, func(ctx context.Context) error {
			s.stats.lists.Add(1)
			var err error
			resp, err = s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
				Bucket:            &s.cfg.Bucket,
				Prefix:            &oprefix,
				StartAfter:        startAfter,
				ContinuationToken: token,
				MaxKeys:           &want,
			})
			return err
		}, false)
		if err != nil {
			return nil, err
		}
		for _, o := range resp.Contents {
			name := aws.ToString(o.Key)
			if !strings.HasSuffix(name, keySuffix) {
				continue // not the driver's object
			}
			k := strings.TrimSuffix(name[len(s.cfg.Prefix):], keySuffix)
			if k > after {
				keys = append(keys, k)
			}
		}
		if (limit > 0 && len(keys) >= limit) || !aws.ToBool(resp.IsTruncated) || resp.NextContinuationToken == nil {
			break
		}
		token = resp.NextContinuationToken
	}
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys, nil
}

// Close releases idle connections; later calls fail with stream.ErrClosed.
func (s *Storage) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.conns.closeAll()
	return nil
}

// uri names key's object for error messages.
func (s *Storage) uri(key string) string {
	return "s3://" + s.cfg.Bucket + "/" + s.cfg.Prefix + key
}
