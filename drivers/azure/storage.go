package azure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// deleteParallelism bounds the concurrent blob deletes of one Delete call.
const deleteParallelism = 8

// Storage is a chunked.Storage on one Azure Blob container (under an
// optional prefix): block blobs written with If-None-Match: * for
// put-if-absent, ranged downloads, and flat listing for recovery and GC
// only. It counts its requests (chunked.StatsReporter).
type Storage struct {
	cfg       Config
	container *container.Client
	where     string // "azure container C at URL", for error messages
	stats     *counters
	transport *http.Transport
	token     azcore.TokenCredential // DefaultAzureCredential, when used
}

var (
	_ chunked.Storage       = (*Storage)(nil)
	_ chunked.StatsReporter = (*Storage)(nil)
)

// OpenStorage builds the Storage for cfg (validated and defaulted here) and
// checks that the container exists and the credentials are accepted, so a
// wrong key, a missing container or an unreachable endpoint fail here with
// an error that says which.
func OpenStorage(ctx context.Context, cfg Config) (*Storage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Storage{cfg: cfg, stats: &counters{}}
	s.transport = http.DefaultTransport.(*http.Transport).Clone()
	s.transport.DialContext = (&net.Dialer{Timeout: cfg.Timeouts.Connect, KeepAlive: 30 * time.Second}).DialContext
	s.transport.MaxIdleConns = 256
	s.transport.MaxIdleConnsPerHost = 64
	s.transport.ResponseHeaderTimeout = cfg.Timeouts.Request

	retries := int32(cfg.Retry.MaxAttempts - 1)
	if retries == 0 {
		retries = -1 // azcore: 0 means its default of 3, <0 means none
	}
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: s.transport},
		Retry: policy.RetryOptions{
			MaxRetries:    retries,
			TryTimeout:    cfg.Timeouts.Request,
			RetryDelay:    cfg.Retry.BaseDelay,
			MaxRetryDelay: cfg.Retry.MaxDelay,
		},
		PerCallPolicies:  []policy.Policy{callCounter{s.stats}},
		PerRetryPolicies: []policy.Policy{tryCounter{s.stats}},
		Telemetry:        policy.TelemetryOptions{ApplicationID: "strata"},
	}}
	var err error
	s.container, s.token, err = newContainerClient(cfg, opts)
	if err != nil {
		s.transport.CloseIdleConnections()
		return nil, err
	}
	s.where = fmt.Sprintf("azure container %s at %s", cfg.Container, strings.TrimSuffix(withoutQuery(s.container.URL()), "/"+cfg.Container))
	if err := s.check(ctx); err != nil {
		s.transport.CloseIdleConnections()
		return nil, err
	}
	return s, nil
}

// newContainerClient picks the client constructor for the credentials. It
// also returns the token credential when it uses DefaultAzureCredential.
func newContainerClient(cfg Config, opts *container.ClientOptions) (*container.Client, azcore.TokenCredential, error) {
	cr := cfg.Credentials
	bad := func(field string, err error) error {
		return fmt.Errorf("%w: azure config: %s: %v", stream.ErrInvalidArgument, field, err)
	}
	containerURL := strings.TrimSuffix(cfg.AccountURL, "/") + "/" + cfg.Container
	switch {
	case cr.ConnectionString != "":
		c, err := container.NewClientFromConnectionString(cr.ConnectionString, cfg.Container, opts)
		if err != nil {
			return nil, nil, bad("credentials.connection_string", err)
		}
		return c, nil, nil
	case cr.AccountKey != "":
		key, err := azblob.NewSharedKeyCredential(cr.AccountName, cr.AccountKey)
		if err != nil {
			return nil, nil, bad("credentials.account_key", err)
		}
		c, err := container.NewClientWithSharedKeyCredential(containerURL, key, opts)
		if err != nil {
			return nil, nil, bad("account_url", err)
		}
		return c, nil, nil
	case cr.SASToken != "":
		c, err := container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(cr.SASToken, "?"), opts)
		if err != nil {
			return nil, nil, bad("credentials.sas_token", err)
		}
		return c, nil, nil
	default:
		tok, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, nil, bad("credentials", fmt.Errorf("no key, connection string or SAS, and DefaultAzureCredential failed: %v", err))
		}
		c, err := container.NewClient(containerURL, tok, opts)
		if err != nil {
			return nil, nil, bad("account_url", err)
		}
		return c, tok, nil
	}
}

// storageScope is the Azure AD scope of Azure Storage.
const storageScope = "https://storage.azure.com/.default"

// probeKey is a blob name that is never written; reading its properties
// proves the endpoint answers, the credentials work and the container
// exists, with only read permission (which a container SAS may lack for
// container-level calls).
const probeKey = ".strata-open-probe"

// check probes the container once and turns the usual misconfigurations
// into clear errors.
func (s *Storage) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeouts.Operation)
	defer cancel()
	if s.token != nil {
		if _, err := s.token.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{storageScope}}); err != nil {
			return fmt.Errorf("%w: %s: credentials: DefaultAzureCredential got no token (configure an Azure identity, "+
				"or set credentials.account_key, connection_string or sas_token): %v", stream.ErrInvalidArgument, s.where, err)
		}
	}
	_, err := s.container.NewBlobClient(s.cfg.Prefix+probeKey).GetProperties(ctx, nil)
	var re *azcore.ResponseError
	switch {
	case err == nil, bloberror.HasCode(err, bloberror.BlobNotFound):
		return nil
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		return fmt.Errorf("%w: %s: container does not exist (create it first)", stream.ErrInvalidArgument, s.where)
	case errors.As(err, &re) && (re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized):
		return fmt.Errorf("%w: %s: credentials rejected (HTTP %d %s): wrong key, expired SAS or missing permission",
			stream.ErrInvalidArgument, s.where, re.StatusCode, re.ErrorCode)
	case errors.As(err, &re):
		return fmt.Errorf("%w: %s: probe failed: HTTP %d %s", stream.ErrUnavailable, s.where, re.StatusCode, re.ErrorCode)
	default:
		return fmt.Errorf("%w: %s: endpoint unreachable: %w", stream.ErrUnavailable, s.where, redactErr(err))
	}
}

// blobName maps a Storage key to its blob name.
func (s *Storage) blobName(key string) string { return s.cfg.Prefix + key }

// mapErr turns an azblob error into the contract's: absent blobs are
// ErrNotFound, a failed put-if-absent condition (when exists is true) is
// ErrAlreadyExists, and everything else — transport errors, timeouts, 5xx,
// auth failures, a vanished container — is ErrUnavailable.
func (s *Storage) mapErr(op, key string, err error, exists bool) error {
	var re *azcore.ResponseError
	isResp := errors.As(err, &re)
	switch {
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		s.stats.errors.Add(1)
		return fmt.Errorf("%w: %s %s: %s: container not found", stream.ErrUnavailable, op, key, s.where)
	case bloberror.HasCode(err, bloberror.BlobNotFound) || isResp && re.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s %s: %s", stream.ErrNotFound, op, key, s.where)
	case exists && (bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet) ||
		isResp && (re.StatusCode == http.StatusConflict || re.StatusCode == http.StatusPreconditionFailed)):
		return fmt.Errorf("%w: %s %s: %s", stream.ErrAlreadyExists, op, key, s.where)
	case isResp:
		s.stats.errors.Add(1)
		return fmt.Errorf("%w: %s %s: %s: HTTP %d %s", stream.ErrUnavailable, op, key, s.where, re.StatusCode, re.ErrorCode)
	default:
		s.stats.errors.Add(1)
		return fmt.Errorf("%w: %s %s: %s: %w", stream.ErrUnavailable, op, key, s.where, redactErr(err))
	}
}

// opCtx bounds one Storage call with the operation timeout.
func (s *Storage) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.Timeouts.Operation)
}

// upload writes data to key, with cond as access conditions.
func (s *Storage) upload(ctx context.Context, key string, data []byte, cond *blob.AccessConditions) error {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	_, err := s.container.NewBlockBlobClient(s.blobName(key)).Upload(ctx,
		streaming.NopCloser(bytes.NewReader(data)),
		&blockblob.UploadOptions{AccessConditions: cond})
	return err
}

// PutIfAbsent implements chunked.Storage with a block blob upload under
// If-None-Match: *. A retried try whose first attempt landed reports
// ErrAlreadyExists; the engine tells its own put from another's by the
// put id inside the blob.
func (s *Storage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := s.upload(ctx, key, data, &blob.AccessConditions{
		ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)},
	})
	if err != nil {
		return s.mapErr("put-if-absent", key, err, true)
	}
	return nil
}

// Put implements chunked.Storage: an unconditional block blob upload.
func (s *Storage) Put(ctx context.Context, key string, data []byte) error {
	if err := s.upload(ctx, key, data, nil); err != nil {
		return s.mapErr("put", key, err, false)
	}
	return nil
}

// Get implements chunked.Storage with a ranged download. A range that
// starts at or past the end answers 416 from the service, which is read as
// "no bytes" (the blob exists, or the answer would be 404).
func (s *Storage) Get(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if off < 0 {
		return nil, fmt.Errorf("%w: get %s: negative offset %d", stream.ErrInvalidArgument, key, off)
	}
	if length == 0 {
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return []byte{}, nil
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	rng := blob.HTTPRange{Offset: off}
	if length > 0 {
		rng.Count = length
	}
	resp, err := s.container.NewBlobClient(s.blobName(key)).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: rng})
	if err != nil {
		if bloberror.HasCode(err, bloberror.InvalidRange) {
			return []byte{}, nil
		}
		return nil, s.mapErr("get", key, err, false)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if resp.ContentLength != nil && *resp.ContentLength > 0 {
		buf.Grow(int(*resp.ContentLength))
	}
	if _, err := io.Copy(&buf, resp.Body); err != nil {
		return nil, s.mapErr("get", key, fmt.Errorf("reading body at offset %d: %w", off, err), false)
	}
	if resp.ContentLength != nil && int64(buf.Len()) != *resp.ContentLength {
		s.stats.errors.Add(1)
		return nil, fmt.Errorf("%w: get %s: %s: short body, %d of %d bytes", stream.ErrUnavailable, key, s.where, buf.Len(), *resp.ContentLength)
	}
	s.stats.bytesRead.Add(int64(buf.Len()))
	return buf.Bytes(), nil
}

// Stat implements chunked.Storage with a properties (HEAD) request.
func (s *Storage) Stat(ctx context.Context, key string) (int64, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	p, err := s.container.NewBlobClient(s.blobName(key)).GetProperties(ctx, nil)
	if err != nil {
		return 0, s.mapErr("stat", key, err, false)
	}
	if p.ContentLength == nil {
		return 0, fmt.Errorf("%w: stat %s: %s: no Content-Length", stream.ErrUnavailable, key, s.where)
	}
	return *p.ContentLength, nil
}

// Delete implements chunked.Storage: one delete per blob, a few at a time;
// absent blobs are skipped.
func (s *Storage) Delete(ctx context.Context, keys []string) error {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, deleteParallelism)
	)
	for _, key := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := s.container.NewBlobClient(s.blobName(key)).Delete(ctx, nil)
			if err == nil {
				return
			}
			if err = s.mapErr("delete", key, err, false); errors.Is(err, stream.ErrNotFound) {
				return
			}
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return first
}

// List implements chunked.Storage with a flat listing of prefix. The
// listing marker is opaque, so it cannot start at "after": keys up to it are
// dropped client-side, and the rest sorted bytewise before the limit.
func (s *Storage) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	full := s.blobName(prefix)
	pager := s.container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &full})
	var keys []string
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, s.mapErr("list", prefix, err, false)
		}
		for _, item := range page.Segment.BlobItems {
			if item.Name == nil {
				continue
			}
			if key := strings.TrimPrefix(*item.Name, s.cfg.Prefix); key > after {
				keys = append(keys, key)
			}
		}
	}
	slices.Sort(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys, nil
}

// Close implements chunked.Storage.
func (s *Storage) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// RequestStats implements chunked.StatsReporter.
func (s *Storage) RequestStats() chunked.RequestStats { return s.stats.snapshot() }
