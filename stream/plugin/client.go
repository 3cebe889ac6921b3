package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// Option configures Start and Open.
type Option func(*options)

type options struct {
	sha256       []byte
	sha256Err    error
	logger       *slog.Logger
	startTimeout time.Duration
	args         []string
	restartDelay time.Duration
}

// WithSHA256 pins the driver binary: Start refuses to run it unless the
// SHA-256 of the file is sum (64 hex digits). A malformed sum or a mismatch
// is an error wrapping stream.ErrInvalidArgument.
func WithSHA256(sum string) Option {
	return func(o *options) {
		b, err := hex.DecodeString(sum)
		if err == nil && len(b) != sha256.Size {
			err = fmt.Errorf("%d bytes, want %d", len(b), sha256.Size)
		}
		if err != nil {
			o.sha256Err = fmt.Errorf("%w: driver sha256 %q is not 64 hex digits: %v", stream.ErrInvalidArgument, sum, err)
			return
		}
		o.sha256 = b
	}
}

// WithArgs passes args to the driver binary on its command line. Other
// users of the machine can read a command line: args must hold no secret
// (config travels in OpenStore).
func WithArgs(args ...string) Option {
	return func(o *options) { o.args = append([]string(nil), args...) }
}

// WithLogger sets the slog.Logger that receives the driver process's logs
// and go-plugin's own messages. The default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithStartTimeout bounds how long Start waits for the driver's handshake
// when ctx has no earlier deadline. The default is one minute.
func WithStartTimeout(d time.Duration) Option {
	return func(o *options) { o.startTimeout = d }
}

// exitPollInterval is how often a Client checks whether its driver process
// has exited.
const exitPollInterval = 20 * time.Millisecond

// exitGrace is how long a call that lost its connection waits for the
// driver process's exit status, to name it in the error.
const exitGrace = 2 * time.Second

// Client is one running driver process. Its methods are safe for concurrent
// use. Several Stores may be opened on one Client.
type Client struct {
	binary string
	pc     *goplugin.Client
	proc   *procRunner
	rpc    streamv1.DriverClient // the go-plugin connection (AutoMTLS)
	logger *slog.Logger

	// bulk carries Append and Fetch: the data channel when the driver
	// serves it, else rpc.
	bulk     streamv1.DriverClient
	dataConn *grpc.ClientConn

	// ctx lives as long as the Client; long-lived calls (append streams)
	// use it, and Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	exited  chan struct{} // closed once the process has exited
	exitMsg string        // how it exited; set before exited is closed

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
	// diedFirst: the process had exited before Close, so calls keep
	// failing with ErrUnavailable naming the exit.
	diedFirst atomic.Bool
}

// clients is the set of running Clients, for CleanupClients.
var (
	clientsMu sync.Mutex
	clients   = map[*Client]struct{}{}
)

// Start runs the driver binary and connects to it: go-plugin's handshake
// with Strata's cookie, protocol version 1, gRPC only, automatic mutual TLS,
// and the SHA-256 pin of WithSHA256. No config is passed yet; see
// OpenStore.
//
// A binary that cannot be run, is not a Strata driver, speaks another
// protocol version or fails its checksum gives an error wrapping
// stream.ErrInvalidArgument; a ctx that ends first gives ctx.Err().
func Start(ctx context.Context, binary string, opts ...Option) (*Client, error) {
	o := options{logger: slog.Default(), startTimeout: time.Minute}
	for _, opt := range opts {
		opt(&o)
	}
	if o.sha256Err != nil {
		return nil, o.sha256Err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := o.startTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	var (
		env   []string
		extra []*os.File
		proc  *procRunner // set by the RunnerFunc once go-plugin starts
	)
	data, err := newDataPair()
	if err != nil {
		o.logger.Warn("strata plugin: no data channel; bulk calls use the go-plugin connection", "error", err)
	} else {
		env, extra = data.attach(env, extra)
	}
	cfg := &goplugin.ClientConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: pluginSets(nil),
		RunnerFunc:       runnerFunc(binary, &o, env, extra, &proc),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     timeout,
		Logger:           newHCLogBridge(o.logger, "strata-plugin"),
		GRPCDialOptions: []grpc.DialOption{
			grpc.WithInitialWindowSize(windowBytes),
			grpc.WithInitialConnWindowSize(windowBytes),
			grpc.WithReadBufferSize(socketBufferBytes),
			grpc.WithWriteBufferSize(socketBufferBytes),
		},
	}
	pc := goplugin.NewClient(cfg)

	type result struct {
		raw any
		err error
	}
	ch := make(chan result, 1)
	go func() {
		rpc, err := pc.Client()
		if err != nil {
			ch <- result{err: err}
			return
		}
		raw, err := rpc.Dispense(pluginName)
		ch <- result{raw, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		go func() {
			<-ch
			pc.Kill()
			if data != nil {
				data.closeChild()
				_ = data.host.Close()
			}
		}()
		return nil, fmt.Errorf("start driver %s: %w", binary, ctx.Err())
	}
	if data != nil {
		data.closeChild()
	}
	if r.err != nil {
		if data != nil {
			_ = data.host.Close()
		}
		pc.Kill()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("start driver %s: %w", binary, ctx.Err())
		}
		return nil, fmt.Errorf("%w: start driver %s: %v", stream.ErrInvalidArgument, binary, r.err)
	}
	rpc, ok := r.raw.(streamv1.DriverClient)
	if !ok {
		if data != nil {
			_ = data.host.Close()
		}
		pc.Kill()
		return nil, fmt.Errorf("%w: start driver %s: plugin is a %T, not a Strata driver", stream.ErrInvalidArgument, binary, r.raw)
	}
	c := &Client{
		binary: binary,
		pc:     pc,
		proc:   proc,
		rpc:    rpc,
		bulk:   rpc,
		logger: o.logger,
		exited: make(chan struct{}),
		closed: make(chan struct{}),
	}
	if data != nil {
		c.useDataChannel(ctx, data)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.watchExit()
	clientsMu.Lock()
	clients[c] = struct{}{}
	clientsMu.Unlock()
	return c, nil
}

// useDataChannel moves the bulk calls to the data channel if the driver
// serves it.
func (c *Client) useDataChannel(ctx context.Context, data *dataPair) {
	hello, err := c.rpc.Hello(ctx, &streamv1.HelloRequest{})
	if err != nil || !hello.GetDataChannel() {
		_ = data.host.Close()
		c.logger.Debug("strata driver serves no data channel; bulk calls use the go-plugin connection", "binary", c.binary, "error", err)
		return
	}
	conn, err := data.dial()
	if err != nil {
		c.logger.Warn("strata plugin: data channel unusable; bulk calls use the go-plugin connection", "binary", c.binary, "error", err)
		return
	}
	c.dataConn = conn
	c.bulk = streamv1.NewDriverClient(conn)
}

// watchExit records how the driver process exited.
func (c *Client) watchExit() {
	t := time.NewTicker(exitPollInterval)
	defer t.Stop()
	for !c.pc.Exited() {
		<-t.C
	}
	// go-plugin's Wait returned after the runner's, which closed
	// proc.exited after the process's Wait set ProcessState.
	<-c.proc.exited()
	msg := "exited"
	if ps := c.proc.cmd.ProcessState; ps != nil {
		msg = ps.String()
	}
	c.exitMsg = msg
	close(c.exited)
	c.logger.Debug("strata driver process ended", "binary", c.binary, "pid", c.Pid(), "status", msg)
}

// Pid is the driver's process id.
func (c *Client) Pid() int {
	if c.proc.cmd.Process == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

// Binary is the path of the driver binary.
func (c *Client) Binary() string { return c.binary }

// Exited is closed once the driver process has exited.
func (c *Client) Exited() <-chan struct{} { return c.exited }

// Kill sends SIGKILL to the driver process (and its process group) and waits until it has exited.
// Every pending and later call on its stores and streams fails with
// stream.ErrUnavailable. It is meant for crash tests; Close is the orderly
// way to stop a driver.
func (c *Client) Kill() error {
	if err := c.proc.Kill(context.Background()); err != nil {
		select {
		case <-c.exited:
		default:
			return fmt.Errorf("kill driver process %d (%s): %w", c.Pid(), c.binary, err)
		}
	}
	<-c.exited
	return nil
}

// Close ends every call in progress, asks the driver process to exit and
// kills it if it does not within two seconds. Stores and streams opened on
// the Client fail with stream.ErrClosed or stream.ErrUnavailable afterwards.
// Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		select {
		case <-c.exited:
			c.diedFirst.Store(true)
		default:
		}
		close(c.closed)
		c.cancel()
		c.pc.Kill()
		if c.dataConn != nil {
			_ = c.dataConn.Close()
		}
		clientsMu.Lock()
		delete(clients, c)
		clientsMu.Unlock()
	})
	return c.closeErr
}

// CleanupClients closes every Client of this process (and any other
// go-plugin client). Call it on host shutdown, e.g. deferred in main, so
// that no driver process outlives the host.
func CleanupClients() {
	clientsMu.Lock()
	all := make([]*Client, 0, len(clients))
	for c := range clients {
		all = append(all, c)
	}
	clientsMu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Close()
		}()
	}
	wg.Wait()
	goplugin.CleanupClients()
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// describe names the driver process for error messages.
func (c *Client) describe() string {
	return fmt.Sprintf("driver process %d (%s)", c.Pid(), filepath.Base(c.binary))
}

// callErr turns the error of a gRPC call into a contract error. A driver's
// own error keeps its sentinel and message. A lost connection is
// ErrUnavailable naming how the process exited (waiting briefly for the
// exit status), or ErrClosed after Close.
func (c *Client) callErr(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	e := fromStatus(ctx, what, err)
	var re *remoteError
	if errors.As(e, &re) || !errors.Is(e, stream.ErrUnavailable) {
		return e
	}
	if cerr := c.check(what); cerr != nil {
		return cerr
	}
	if status.Code(err) != codes.Unavailable {
		return e
	}
	// The connection broke: the process is likely dying; name its exit.
	select {
	case <-c.exited:
		return c.exitErr(what)
	case <-time.After(exitGrace):
		return e
	}
}

// exitErr is the error of a call on a Client whose process has exited.
func (c *Client) exitErr(what string) error {
	return fmt.Errorf("%w: %s: %s exited: %s", stream.ErrUnavailable, what, c.describe(), c.exitMsg)
}

// check fails fast when the Client is closed or its process has exited.
func (c *Client) check(what string) error {
	if c.diedFirst.Load() {
		return c.exitErr(what)
	}
	if c.isClosed() {
		return fmt.Errorf("%w: %s: %s was closed", stream.ErrClosed, what, c.describe())
	}
	select {
	case <-c.exited:
		return c.exitErr(what)
	default:
		return nil
	}
}

// OpenStore opens a Store in the driver process from config (the driver's
// JSON or YAML config document; it may hold secrets and travels only in this
// call). Several stores may be open on one Client. Closing the Store does
// not stop the driver process.
func (c *Client) OpenStore(ctx context.Context, config []byte) (*stream.Store, error) {
	st, err := c.openStore(ctx, config, false)
	if err != nil {
		return nil, err
	}
	return stream.NewStore(st), nil
}

func (c *Client) openStore(ctx context.Context, config []byte, owns bool) (*hostStore, error) {
	what := "open store"
	if err := c.check(what); err != nil {
		return nil, err
	}
	resp, err := c.rpc.OpenStore(ctx, &streamv1.OpenStoreRequest{Config: config})
	if err != nil {
		return nil, c.callErr(ctx, what, err)
	}
	return &hostStore{c: c, id: resp.GetStore(), info: infoFromProto(resp.GetInfo()), owns: owns}, nil
}

// Open starts the driver binary and opens one Store on it from config. The
// Store's Close also stops the driver process.
func Open(ctx context.Context, binary string, config []byte, opts ...Option) (*stream.Store, error) {
	st, err := open(ctx, binary, config, opts...)
	if err != nil {
		return nil, err
	}
	return stream.NewStore(st), nil
}

// open starts the driver binary and opens the store that owns its Client.
func open(ctx context.Context, binary string, config []byte, opts ...Option) (*hostStore, error) {
	c, err := Start(ctx, binary, opts...)
	if err != nil {
		return nil, err
	}
	st, err := c.openStore(ctx, config, true)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return st, nil
}
