package plugin

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// ProtocolVersion is the plugin protocol this package speaks: the Driver
// service of proto/strata/stream/v1. go-plugin negotiates it through
// VersionedPlugins, so a later protocol 2 can be served next to it.
const ProtocolVersion = 1

// pluginName is the name of the one plugin a driver binary serves.
const pluginName = "driver"

// handshake is Strata's go-plugin handshake. The cookie only keeps a driver
// binary from being run by hand or by another go-plugin host; it is not a
// secret.
var handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "STRATA_DRIVER_PLUGIN",
	MagicCookieValue: "5f0d3c1e8a9b4e27b6a1c2d3e4f50617-strata-stream-driver",
}

// driverPlugin is the go-plugin glue of the Driver service: it registers the
// server in a driver process and hands the host a client.
type driverPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	server streamv1.DriverServer // driver side only
}

func (p *driverPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.server == nil {
		return errors.New("strata plugin: no driver server to register")
	}
	streamv1.RegisterDriverServer(s, p.server)
	return nil
}

func (p *driverPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return streamv1.NewDriverClient(c), nil
}

// pluginSets is what each side offers in the version negotiation.
func pluginSets(server streamv1.DriverServer) map[int]goplugin.PluginSet {
	return map[int]goplugin.PluginSet{
		ProtocolVersion: {pluginName: &driverPlugin{server: server}},
	}
}
