package s3

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stratastream/strata/stream"
)

// TestCloseClosesConnections: Close closes every connection the driver's
// HTTP client dialed, idle or not (each would otherwise keep two
// goroutines of net/http alive), and it dials no more.
func TestCloseClosesConnections(t *testing.T) {
	ctx := context.Background()
	s, err := OpenStorage(ctx, minioConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "conns/a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "conns/a", 0, -1); err != nil {
		t.Fatal(err)
	}
	if n := s.conns.open(); n == 0 {
		t.Fatal("no tracked connection after a probe, a PUT and a GET: the test cannot tell")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.conns.open(); n != 0 {
		t.Fatalf("%d connections still open after Close", n)
	}
	// A dial after Close (a request the SDK retries late) is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := s.conns.dialer((&net.Dialer{}).DialContext)
	if c, err := dial(ctx, "tcp", ln.Addr().String()); !errors.Is(err, stream.ErrClosed) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial after Close: %v, want ErrClosed", err)
	}
}
