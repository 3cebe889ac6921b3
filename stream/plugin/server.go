package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// Serve is the whole main of a driver binary:
//
//	func main() { plugin.Serve(memory.Open) }
//
// It speaks go-plugin's handshake on stdout, serves the Driver gRPC service
// (proto/strata/stream/v1) over a Unix socket with mutual TLS, opens a Store
// with open for every OpenStore call (the config arrives in that call, never
// in argv or the environment), and returns when the host shuts the plugin
// down. The process exits on its own when its host process dies.
//
// The driver's log/slog default logger is set to write hclog JSON lines to
// the original stderr, which go-plugin forwards to the host's slog.Logger.
// Run by hand, outside a host, Serve prints a notice and exits with status 1.
func Serve(open stream.Opener) {
	stderr := os.Stderr
	level := new(slog.LevelVar)
	level.Set(slog.LevelDebug)
	logger := slog.New(newDriverLogHandler(stderr, level))
	slog.SetDefault(logger)

	srv := newServer(open, logger)
	srv.dataChannel = serveDataChannel(srv, logger)
	stop := watchParent(logger, srv)
	defer stop()

	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: pluginSets(srv),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, serverOptions()...)...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       "go-plugin",
			Level:      hclog.Info,
			Output:     stderr,
			JSONFormat: true,
		}),
	})
	srv.closeAll()
}

// Transport tuning shared by both sides: messages up to maxMessageBytes,
// large flow-control windows so a pipelined append stream is never stalled
// waiting for a window update, and larger socket buffers than gRPC's 32 KiB.
const (
	windowBytes       = 16 << 20
	socketBufferBytes = 256 << 10
)

func serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMessageBytes),
		grpc.MaxSendMsgSize(maxMessageBytes),
		grpc.InitialWindowSize(windowBytes),
		grpc.InitialConnWindowSize(windowBytes),
		grpc.ReadBufferSize(socketBufferBytes),
		grpc.WriteBufferSize(socketBufferBytes),
		grpc.ForceServerCodecV2(driverCodec{proto: encoding.GetCodecV2("proto")}),
	}
}

// parentPollInterval is how often a driver checks that its host is alive.
const parentPollInterval = 250 * time.Millisecond

// watchParent makes the driver exit when the host process dies: the driver
// is then re-parented, so its parent pid changes. It returns a function that
// stops the watch.
func watchParent(logger *slog.Logger, srv *server) (stop func()) {
	ppid := os.Getppid()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(parentPollInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if os.Getppid() != ppid {
				logger.Error("host process is gone; driver exits", "host_pid", ppid)
				srv.closeAll()
				os.Exit(3)
			}
		}
	}()
	return func() { close(done) }
}

// server is the driver side of the Driver service: it holds the stores and
// stream sessions the host opened, by id.
type server struct {
	streamv1.UnimplementedDriverServer
	open   stream.Opener
	logger *slog.Logger
	// dataChannel: the service is also served on the host's data channel.
	dataChannel bool

	mu       sync.Mutex
	nextID   uint64
	stores   map[uint64]*stream.Store
	sessions map[uint64]*stream.Stream
}

func newServer(open stream.Opener, logger *slog.Logger) *server {
	return &server{
		open:     open,
		logger:   logger,
		stores:   map[uint64]*stream.Store{},
		sessions: map[uint64]*stream.Stream{},
	}
}

// closeAll closes every session and store (best effort) when the plugin
// stops.
func (s *server) closeAll() {
	s.mu.Lock()
	sessions, stores := s.sessions, s.stores
	s.sessions, s.stores = map[uint64]*stream.Stream{}, map[uint64]*stream.Store{}
	s.mu.Unlock()
	for _, st := range sessions {
		_ = st.Close()
	}
	for _, st := range stores {
		_ = st.Close()
	}
}

func (s *server) store(id uint64) (*stream.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.stores[id]
	if !ok {
		return nil, fmt.Errorf("%w: store %d is not open in this driver process", stream.ErrClosed, id)
	}
	return st, nil
}

func (s *server) session(id uint64) (*stream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sessions[id]
	if !ok {
		return nil, fmt.Errorf("%w: stream session %d is not open in this driver process", stream.ErrClosed, id)
	}
	return st, nil
}

func (s *server) Hello(context.Context, *streamv1.HelloRequest) (*streamv1.HelloResponse, error) {
	return &streamv1.HelloResponse{DataChannel: s.dataChannel}, nil
}

func (s *server) OpenStore(ctx context.Context, req *streamv1.OpenStoreRequest) (*streamv1.OpenStoreResponse, error) {
	st, err := s.open(ctx, req.GetConfig())
	if err != nil {
		return nil, toStatus(err)
	}
	if st == nil {
		return nil, toStatus(fmt.Errorf("%w: driver's Open returned no store and no error", stream.ErrUnavailable))
	}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.stores[id] = st
	s.mu.Unlock()
	return &streamv1.OpenStoreResponse{Store: id, Info: infoToProto(st.Info())}, nil
}

func (s *server) CloseStore(_ context.Context, req *streamv1.CloseStoreRequest) (*streamv1.Empty, error) {
	s.mu.Lock()
	st, ok := s.stores[req.GetStore()]
	delete(s.stores, req.GetStore())
	s.mu.Unlock()
	if !ok {
		return nil, toStatus(fmt.Errorf("%w: store %d is not open in this driver process", stream.ErrClosed, req.GetStore()))
	}
	return &streamv1.Empty{}, toStatus(st.Close())
}

func (s *server) Create(ctx context.Context, req *streamv1.StreamNameRequest) (*streamv1.Empty, error) {
	st, err := s.store(req.GetStore())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := st.Create(ctx, string(req.GetName())); err != nil {
		return nil, toStatus(err)
	}
	return &streamv1.Empty{}, nil
}

func (s *server) Delete(ctx context.Context, req *streamv1.StreamNameRequest) (*streamv1.Empty, error) {
	st, err := s.store(req.GetStore())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := st.Delete(ctx, string(req.GetName())); err != nil {
		return nil, toStatus(err)
	}
	return &streamv1.Empty{}, nil
}

func (s *server) List(ctx context.Context, req *streamv1.ListRequest) (*streamv1.ListResponse, error) {
	st, err := s.store(req.GetStore())
	if err != nil {
		return nil, toStatus(err)
	}
	names, err := st.List(ctx, string(req.GetPrefix()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &streamv1.ListResponse{Names: names}, nil
}

func (s *server) OpenStream(ctx context.Context, req *streamv1.OpenStreamRequest) (*streamv1.OpenStreamResponse, error) {
	st, err := s.store(req.GetStore())
	if err != nil {
		return nil, toStatus(err)
	}
	mode, err := modeFromProto(req.GetMode())
	if err != nil {
		return nil, toStatus(err)
	}
	sess, err := st.Open(ctx, string(req.GetName()), stream.OpenOptions{
		Epoch:           req.GetEpoch(),
		Mode:            mode,
		CreateIfMissing: req.GetCreateIfMissing(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.sessions[id] = sess
	s.mu.Unlock()
	return &streamv1.OpenStreamResponse{
		Session:     id,
		StartOffset: sess.StartOffset(),
		NextOffset:  sess.NextOffset(),
		Epoch:       sess.Epoch(),
	}, nil
}

func (s *server) CloseStream(_ context.Context, req *streamv1.CloseStreamRequest) (*streamv1.Empty, error) {
	s.mu.Lock()
	sess, ok := s.sessions[req.GetSession()]
	delete(s.sessions, req.GetSession())
	s.mu.Unlock()
	if !ok {
		return nil, toStatus(fmt.Errorf("%w: stream session %d is not open in this driver process", stream.ErrClosed, req.GetSession()))
	}
	return &streamv1.Empty{}, toStatus(sess.Close())
}

func (s *server) Trim(ctx context.Context, req *streamv1.TrimRequest) (*streamv1.OffsetsResponse, error) {
	sess, err := s.session(req.GetSession())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := sess.Trim(ctx, req.GetNewStart()); err != nil {
		return nil, toStatus(err)
	}
	return &streamv1.OffsetsResponse{StartOffset: sess.StartOffset(), NextOffset: sess.NextOffset()}, nil
}

func (s *server) Fetch(req *streamv1.FetchRequest, call grpc.ServerStreamingServer[streamv1.FetchResponse]) error {
	sess, err := s.session(req.GetSession())
	if err != nil {
		return toStatus(err)
	}
	maxBytes := req.GetMaxBytes()
	if maxBytes > maxMessageBytes {
		maxBytes = maxMessageBytes
	}
	batches, err := sess.Fetch(call.Context(), req.GetStart(), req.GetEnd(), int(maxBytes))
	if err != nil {
		return toStatus(err)
	}
	// Offsets are read after the fetch, so no batch lies beyond next.
	so, no := sess.StartOffset(), sess.NextOffset()
	resp := &streamv1.FetchResponse{StartOffset: so, NextOffset: no}
	size := 0
	for i := range batches {
		b := &batches[i]
		if len(resp.Batches) > 0 && size+b.Size() > coalesceBytes {
			if err := call.Send(resp); err != nil {
				return err
			}
			resp = &streamv1.FetchResponse{StartOffset: so, NextOffset: no}
			size = 0
		}
		resp.Batches = append(resp.Batches, batchToProto(b, stream.Checksum(b.Payload)))
		size += b.Size()
	}
	return call.Send(resp)
}

func infoToProto(i stream.Info) *streamv1.Info {
	return &streamv1.Info{
		Driver:          strings.ToValidUTF8(i.Driver, "\uFFFD"),
		Version:         strings.ToValidUTF8(i.Version, "\uFFFD"),
		MaxBatchBytes:   int64(i.MaxBatchBytes),
		MaxProperties:   int64(i.MaxProperties),
		MaxFetchBytes:   int64(i.MaxFetchBytes),
		ReadOnlyOpen:    i.ReadOnlyOpen,
		Durable:         i.Durable,
		SharedNamespace: i.SharedNamespace,
	}
}

func infoFromProto(i *streamv1.Info) stream.Info {
	return stream.Info{
		Driver:          i.GetDriver(),
		Version:         i.GetVersion(),
		MaxBatchBytes:   int(i.GetMaxBatchBytes()),
		MaxProperties:   int(i.GetMaxProperties()),
		MaxFetchBytes:   int(i.GetMaxFetchBytes()),
		ReadOnlyOpen:    i.GetReadOnlyOpen(),
		Durable:         i.GetDurable(),
		SharedNamespace: i.GetSharedNamespace(),
	}
}

func modeToProto(m stream.Mode) streamv1.Mode {
	if m == stream.ModeReadOnly {
		return streamv1.Mode_MODE_READ_ONLY
	}
	return streamv1.Mode_MODE_READ_WRITE
}

func modeFromProto(m streamv1.Mode) (stream.Mode, error) {
	switch m {
	case streamv1.Mode_MODE_READ_WRITE:
		return stream.ModeReadWrite, nil
	case streamv1.Mode_MODE_READ_ONLY:
		return stream.ModeReadOnly, nil
	}
	return 0, fmt.Errorf("%w: open mode %d", stream.ErrInvalidArgument, m)
}
