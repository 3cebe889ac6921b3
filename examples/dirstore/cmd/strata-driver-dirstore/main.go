// Command strata-driver-dirstore is the example driver as a plugin binary,
// loaded out-of-process by stream/plugin (strata conformance --driver
// ./strata-driver-dirstore --config FILE). Not meant to be run by hand: it
// speaks go-plugin's handshake on stdout.
package main

import (
	"github.com/stratastream/strata/examples/dirstore"
	"github.com/stratastream/strata/stream/plugin"
)

func main() { plugin.Serve(dirstore.Open) }
