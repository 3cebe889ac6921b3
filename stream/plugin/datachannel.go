package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// The data channel: the bulk path (Append and Fetch) runs over a second gRPC
// connection on a private Unix socket pair, without TLS. The host creates
// the pair with socketpair(2) and passes one end to the driver as an
// inherited file descriptor (exec's ExtraFiles), naming its number in
// dataFDEnv. No other process can reach an unnamed socket pair, so it needs
// no authentication, just as go-plugin trusts the stdout pipe it negotiates
// the handshake on; TLS on the bulk path cost two thirds of the throughput
// (docs/benchmarks.md). The go-plugin connection (AutoMTLS) keeps every
// other call. A driver that does not serve the channel answers Hello with
// data_channel=false (or does not implement Hello), and the host sends
// everything over the go-plugin connection.

// dataFDEnv names the environment variable that tells the driver which
// inherited file descriptor is its end of the data channel. It carries no
// config and no secret.
const dataFDEnv = "STRATA_DRIVER_DATA_FD"

// dataPair is the host's side of a data channel being set up.
type dataPair struct {
	host  *os.File // the host's end
	child *os.File // the driver's end, closed in the host once started
}

// attach passes the driver's end to cmd as the first extra file (fd 3).
func (d *dataPair) attach(env []string, extra []*os.File) ([]string, []*os.File) {
	fd := 3 + len(extra)
	return append(env, dataFDEnv+"="+strconv.Itoa(fd)), append(extra, d.child)
}

// closeChild closes the host's copy of the driver's end (after the driver
// started, or when it could not).
func (d *dataPair) closeChild() { _ = d.child.Close() }

// dial turns the host's end into a gRPC client connection. The connection
// can be made once: if it breaks, it is not redialled, and calls on it fail
// with codes.Unavailable.
func (d *dataPair) dial() (*grpc.ClientConn, error) {
	conn, err := net.FileConn(d.host)
	_ = d.host.Close()
	if err != nil {
		return nil, fmt.Errorf("data channel: %w", err)
	}
	var once sync.Once
	dialer := func(context.Context, string) (net.Conn, error) {
		var c net.Conn
		once.Do(func() { c = conn })
		if c == nil {
			return nil, errors.New("data channel to the driver is closed")
		}
		return c, nil
	}
	return grpc.NewClient("passthrough:///strata-data-channel",
		grpc.WithContextDialer(dialer),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(windowBytes),
		grpc.WithInitialConnWindowSize(windowBytes),
		grpc.WithReadBufferSize(socketBufferBytes),
		grpc.WithWriteBufferSize(socketBufferBytes),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
	)
}

// serveDataChannel serves srv on the inherited data channel named by
// dataFDEnv, if any. It reports whether it does.
func serveDataChannel(srv *server, logger *slog.Logger) bool {
	v := os.Getenv(dataFDEnv)
	if v == "" {
		return false
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		logger.Warn("ignoring a malformed data channel descriptor", "env", dataFDEnv, "value", v)
		return false
	}
	f := os.NewFile(uintptr(fd), "strata-data")
	conn, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		logger.Warn("no data channel", "fd", fd, "error", err)
		return false
	}
	gs := grpc.NewServer(serverOptions()...)
	streamv1.RegisterDriverServer(gs, srv)
	go func() { _ = gs.Serve(newOneConnListener(conn)) }()
	return true
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	addr   net.Addr
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{conns: make(chan net.Conn, 1), closed: make(chan struct{}), addr: c.LocalAddr()}
	l.conns <- c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.addr }
