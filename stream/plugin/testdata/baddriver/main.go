// Command baddriver is a test fixture: a go-plugin server that speaks
// Strata's handshake but misbehaves on the wire in the way its config (the
// mode, sent in OpenStore) says. It does not use plugin.Serve, as a driver
// written against the protocol alone would not.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// protocolVersion can be changed with -ldflags "-X main.protocolVersion=2".
var protocolVersion = "1"

// rawMsg is sent as is by rawCodec: bytes that need not be valid protobuf.
type rawMsg []byte

type rawCodec struct{ proto encoding.CodecV2 }

func (c rawCodec) Name() string { return "proto" }
func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawMsg); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return c.proto.Marshal(v)
}
func (c rawCodec) Unmarshal(d mem.BufferSlice, v any) error { return c.proto.Unmarshal(d, v) }

type server struct {
	streamv1.UnimplementedDriverServer
	log  hclog.Logger
	mu   sync.Mutex
	mode string
}

func (s *server) getMode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

func (s *server) OpenStore(_ context.Context, req *streamv1.OpenStoreRequest) (*streamv1.OpenStoreResponse, error) {
	var cfg struct{ Mode string }
	if err := json.Unmarshal(req.GetConfig(), &cfg); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.mode = cfg.Mode
	s.mu.Unlock()
	s.log.Info("baddriver store opened", "mode", cfg.Mode)
	return &streamv1.OpenStoreResponse{Store: 1, Info: &streamv1.Info{Driver: "bad", MaxBatchBytes: 1 << 20, MaxFetchBytes: 1 << 20}}, nil
}

func (s *server) OpenStream(_ context.Context, req *streamv1.OpenStreamRequest) (*streamv1.OpenStreamResponse, error) {
	return &streamv1.OpenStreamResponse{Session: 1, StartOffset: 0, NextOffset: 10}, nil
}

func batch(base int64, count uint32, payload string) *streamv1.Batch {
	return &streamv1.Batch{BaseOffset: base, Count: count, Payload: []byte(payload), Crc32C: stream.Checksum([]byte(payload))}
}

func (s *server) Fetch(req *streamv1.FetchRequest, call grpc.ServerStreamingServer[streamv1.FetchResponse]) error {
	resp := &streamv1.FetchResponse{StartOffset: 0, NextOffset: 10}
	switch s.getMode() {
	case "fetch-badcrc":
		b := batch(0, 5, "hello")
		b.Crc32C ^= 1
		resp.Batches = append(resp.Batches, b)
	case "fetch-gap":
		resp.Batches = append(resp.Batches, batch(0, 2, "ab"), batch(3, 2, "de"))
	case "fetch-notcovering":
		resp.Batches = append(resp.Batches, batch(4, 2, "ef"))
	case "fetch-beyondnext":
		resp.Batches = append(resp.Batches, batch(0, 20, "too far"))
	case "fetch-truncated":
		full, _ := s.marshal(&streamv1.FetchResponse{Batches: []*streamv1.Batch{batch(0, 5, "hello world")}, NextOffset: 10})
		return call.SendMsg(rawMsg(full[:len(full)-4]))
	case "fetch-garbage":
		return call.SendMsg(rawMsg{0xff, 0xff, 0xff, 0xff, 0x0f})
	case "exit":
		os.Exit(7)
	default:
		resp.Batches = append(resp.Batches, batch(0, 10, "fine"))
	}
	return call.Send(resp)
}

func (s *server) marshal(m *streamv1.FetchResponse) ([]byte, error) {
	bs, err := encoding.GetCodecV2("proto").Marshal(m)
	if err != nil {
		return nil, err
	}
	return bs.Materialize(), nil
}

func (s *server) Append(call grpc.BidiStreamingServer[streamv1.AppendRequest, streamv1.AppendResponse]) error {
	next := int64(10)
	for {
		req, err := call.Recv()
		if err != nil {
			return nil
		}
		resp := &streamv1.AppendResponse{}
		for _, b := range req.GetBatches() {
			switch s.getMode() {
			case "ack-badcount":
				resp.Acks = append(resp.Acks, &streamv1.Ack{BaseOffset: next, NextOffset: next + int64(b.GetCount()) + 1})
			case "ack-backwards":
				resp.Acks = append(resp.Acks, &streamv1.Ack{BaseOffset: 0, NextOffset: int64(b.GetCount())})
			case "ack-extra":
				resp.Acks = append(resp.Acks, &streamv1.Ack{BaseOffset: next, NextOffset: next + int64(b.GetCount())},
					&streamv1.Ack{BaseOffset: next, NextOffset: next + int64(b.GetCount())})
			case "ack-truncated":
				return call.SendMsg(rawMsg{0x0a, 0x10, 0x08})
			case "ack-unknown-reason":
				resp.Acks = append(resp.Acks, &streamv1.Ack{Error: &streamv1.Error{Reason: "SOMETHING_NEW", Message: "a reason from the future"}})
			case "exit":
				os.Exit(7)
			default:
				resp.Acks = append(resp.Acks, &streamv1.Ack{BaseOffset: next, NextOffset: next + int64(b.GetCount())})
			}
			next += int64(b.GetCount())
		}
		if err := call.Send(resp); err != nil {
			return err
		}
	}
}

type driverPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	srv *server
}

func (p *driverPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	streamv1.RegisterDriverServer(s, p.srv)
	return nil
}

func (p *driverPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("not a host")
}

func main() {
	v, err := strconv.Atoi(protocolVersion)
	if err != nil {
		panic(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Debug})
	srv := &server{log: log}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  uint(v),
			MagicCookieKey:   "STRATA_DRIVER_PLUGIN",
			MagicCookieValue: "5f0d3c1e8a9b4e27b6a1c2d3e4f50617-strata-stream-driver",
		},
		VersionedPlugins: map[int]goplugin.PluginSet{v: {"driver": &driverPlugin{srv: srv}}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.ForceServerCodecV2(rawCodec{proto: encoding.GetCodecV2("proto")}))...)
		},
		Logger: log,
	})
}
