package azure

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// TestOpenBadInput: each usual misconfiguration fails Open with an error
// that says what is wrong.
func TestOpenBadInput(t *testing.T) {
	base := baseConfig(t)
	quick := func(c Config) Config {
		c.Retry.MaxAttempts = 2
		c.Timeouts.Operation = 10 * time.Second
		return c
	}
	wrongKey := base
	wrongKey.Credentials.AccountKey = "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IHdyb25n"
	noContainer := base
	noContainer.Container = "no-such-container"
	unreachable := base
	unreachable.AccountURL = fmt.Sprintf("http://127.0.0.1:%d/devstoreaccount1", closedPort(t))
	wrongAccount := base
	wrongAccount.Credentials.AccountName = "otheraccount"
	silent := base
	silent.AccountURL = "http://" + drivertest.SilentServer(t) + "/devstoreaccount1"
	silent.Timeouts.Request = 300 * time.Millisecond
	tests := []struct {
		name     string
		cfg      Config
		sentinel error
		says     string
	}{
		{"wrong key", wrongKey, stream.ErrInvalidArgument, "credentials rejected"},
		{"wrong account name", wrongAccount, stream.ErrInvalidArgument, "credentials rejected"},
		{"missing container", noContainer, stream.ErrInvalidArgument, "container does not exist"},
		{"unreachable endpoint", unreachable, stream.ErrUnavailable, "endpoint unreachable"},
		{"endpoint that never answers", silent, stream.ErrUnavailable, "endpoint unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := Open(t.Context(), marshal(t, quick(tt.cfg)))
			if err == nil {
				store.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Open = %v; want %v saying %q", err, tt.sentinel, tt.says)
			}
			if !strings.Contains(err.Error(), tt.cfg.Container) {
				t.Fatalf("Open error does not name the container %s: %v", tt.cfg.Container, err)
			}
			if strings.Contains(err.Error(), tt.cfg.Credentials.AccountKey) {
				t.Fatalf("Open error leaks the key: %v", err)
			}
		})
	}
}

// TestCredentialKinds: a connection string and a container SAS reach the
// same blobs as the shared key.
func TestCredentialKinds(t *testing.T) {
	ctx := t.Context()
	cfg := freshConfig(t)
	keyed, err := OpenStorage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer keyed.Close()
	if err := keyed.PutIfAbsent(ctx, "k", []byte("by key")); err != nil {
		t.Fatal(err)
	}

	conn := cfg
	conn.AccountURL = ""
	conn.Credentials = Credentials{ConnectionString: fmt.Sprintf(
		"DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;",
		accountFromURL(cfg.AccountURL), cfg.Credentials.AccountKey, cfg.AccountURL)}

	cred, err := azblob.NewSharedKeyCredential(accountFromURL(cfg.AccountURL), cfg.Credentials.AccountKey)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := container.NewClientWithSharedKeyCredential(cfg.AccountURL+"/"+cfg.Container, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	perms := sas.ContainerPermissions{Read: true, Add: true, Create: true, Write: true, Delete: true, List: true}
	sasURL, err := cc.GetSASURL(perms, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, query, _ := strings.Cut(sasURL, "?")
	withSAS := cfg
	withSAS.Credentials = Credentials{SASToken: query}

	for name, c := range map[string]Config{"connection string": conn, "sas": withSAS} {
		t.Run(name, func(t *testing.T) {
			st, err := OpenStorage(ctx, c)
			if err != nil {
				t.Fatalf("OpenStorage: %v", err)
			}
			defer st.Close()
			got, err := st.Get(ctx, "k", 0, -1)
			if err != nil || string(got) != "by key" {
				t.Fatalf("Get = %q, %v; want the shared-key blob", got, err)
			}
			key := "by/" + strings.ReplaceAll(name, " ", "-")
			if err := st.PutIfAbsent(ctx, key, []byte(name)); err != nil {
				t.Fatalf("PutIfAbsent: %v", err)
			}
			if err := st.PutIfAbsent(ctx, key, []byte(name)); !errors.Is(err, stream.ErrAlreadyExists) {
				t.Fatalf("second PutIfAbsent = %v, want ErrAlreadyExists", err)
			}
			if keys, err := st.List(ctx, "by/", "", 0); err != nil || len(keys) == 0 {
				t.Fatalf("List = %q, %v", keys, err)
			}
		})
	}
}

// TestRequestStats: every request is counted by kind, with its bytes.
func TestRequestStats(t *testing.T) {
	ctx := t.Context()
	st, err := OpenStorage(ctx, freshConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := st.RequestStats() // the open probe
	if before.Heads != 1 || before.Puts != 0 {
		t.Fatalf("stats after open = %+v, want one HEAD", before)
	}
	data := make([]byte, 1000)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.PutIfAbsent(ctx, "a", data))
	if err := st.PutIfAbsent(ctx, "a", data); !errors.Is(err, stream.ErrAlreadyExists) {
		t.Fatal(err)
	}
	must(st.Put(ctx, "h", data[:10]))
	_, err = st.Get(ctx, "a", 100, 300)
	must(err)
	_, err = st.Stat(ctx, "a")
	must(err)
	_, err = st.List(ctx, "", "", 0)
	must(err)
	must(st.Delete(ctx, []string{"a", "h", "absent"}))
	_, err = st.Stat(ctx, "absent")
	if !errors.Is(err, stream.ErrNotFound) {
		t.Fatal(err)
	}
	got := st.RequestStats()
	want := chunked.RequestStats{
		Puts: 3, Gets: 1, Heads: 3, Lists: 1, Deletes: 3,
		BytesWritten: 2010, BytesRead: 300,
	}
	if got != want {
		t.Fatalf("RequestStats = %+v\nwant          %+v", got, want)
	}
}

// ctl runs testbed/ctl azurite ACTION.
func ctl(t *testing.T, action string) {
	t.Helper()
	drivertest.Ctl(t, "azurite", action)
}

// TestBackendDown: with Azurite stopped every call is ErrUnavailable
// (never "absent" or "taken"), and after a restart the data is still there.
func TestBackendDown(t *testing.T) {
	ctx := t.Context()
	cfg := freshConfig(t)
	cfg.Retry.MaxAttempts = 2
	st, err := OpenStorage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutIfAbsent(ctx, "kept", []byte("before the stop")); err != nil {
		t.Fatal(err)
	}
	ctl(t, "stop")
	stopped := true
	defer func() {
		if stopped {
			ctl(t, "start")
		}
	}()
	calls := map[string]func() error{
		"PutIfAbsent": func() error { return st.PutIfAbsent(ctx, "new", []byte("x")) },
		"Put":         func() error { return st.Put(ctx, "hint", []byte("x")) },
		"Get":         func() error { _, err := st.Get(ctx, "kept", 0, -1); return err },
		"Stat":        func() error { _, err := st.Stat(ctx, "absent"); return err },
		"Delete":      func() error { return st.Delete(ctx, []string{"kept"}) },
		"List":        func() error { _, err := st.List(ctx, "", "", 0); return err },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, stream.ErrUnavailable) || errors.Is(err, stream.ErrNotFound) || errors.Is(err, stream.ErrAlreadyExists) {
			t.Errorf("%s with the backend down = %v, want only ErrUnavailable", name, err)
		}
	}
	var re *azcore.ResponseError
	if err := calls["Get"](); errors.As(err, &re) {
		t.Errorf("transport failure reported as an HTTP answer: %v", err)
	}
	if r := st.RequestStats().Retries; r < int64(len(calls)) {
		t.Errorf("RequestStats.Retries = %d after %d failed calls with 2 attempts each", r, len(calls))
	}
	if st.RequestStats().Errors < int64(len(calls)) {
		t.Errorf("RequestStats.Errors = %d after %d failed calls", st.RequestStats().Errors, len(calls)+1)
	}
	ctl(t, "start")
	stopped = false
	got, err := st.Get(context.Background(), "kept", 0, -1)
	if err != nil || string(got) != "before the stop" {
		t.Fatalf("Get after restart = %q, %v", got, err)
	}
}

// TestContainerVanished: a container deleted under a running Storage is
// ErrUnavailable on every call — never "absent", which would let the engine
// take a stream for gone.
func TestContainerVanished(t *testing.T) {
	ctx := t.Context()
	cfg := baseConfig(t)
	cred, err := azblob.NewSharedKeyCredential(accountFromURL(cfg.AccountURL), cfg.Credentials.AccountKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Container = "vanish-" + strings.ToLower(rand.Text())[:12]
	cc, err := container.NewClientWithSharedKeyCredential(cfg.AccountURL+"/"+cfg.Container, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Create(ctx, nil); err != nil {
		t.Fatalf("creating container %s: %v", cfg.Container, err)
	}
	st, err := OpenStorage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutIfAbsent(ctx, "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Delete(ctx, nil); err != nil {
		t.Fatalf("deleting container %s: %v", cfg.Container, err)
	}
	for name, call := range map[string]func() error{
		"PutIfAbsent": func() error { return st.PutIfAbsent(ctx, "k2", []byte("x")) },
		"Get":         func() error { _, err := st.Get(ctx, "k", 0, -1); return err },
		"Stat":        func() error { _, err := st.Stat(ctx, "k"); return err },
		"List":        func() error { _, err := st.List(ctx, "", "", 0); return err },
	} {
		err := call()
		if !errors.Is(err, stream.ErrUnavailable) || errors.Is(err, stream.ErrNotFound) || errors.Is(err, stream.ErrAlreadyExists) {
			t.Errorf("%s after the container was deleted = %v, want only ErrUnavailable", name, err)
		} else if !strings.Contains(err.Error(), "container not found") {
			t.Errorf("%s error does not say the container is gone: %v", name, err)
		}
	}
}
