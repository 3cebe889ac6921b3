// Command logdriver is a test fixture: the memory driver served through
// plugin.Serve, logging through log/slog when a store opens, so that tests
// see driver logs arrive in the host's slog.
package main

import (
	"context"
	"log/slog"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
)

func main() {
	plugin.Serve(func(ctx context.Context, config []byte) (*stream.Store, error) {
		slog.Info("logdriver opening store", "config_bytes", len(config))
		slog.Debug("logdriver debug line")
		return memory.Open(ctx, config)
	})
}
