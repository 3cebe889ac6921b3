// Command strata-driver-azure is the azure driver's plugin binary: a host
// loads it with stream/plugin and speaks the stream contract to it over
// gRPC. It is not meant to be run by hand.
package main

import (
	"github.com/stratastream/strata/drivers/azure"
	"github.com/stratastream/strata/stream/plugin"
)

func main() { plugin.Serve(azure.Open) }
