// Command strata-driver-s3 is the s3 driver's plugin binary: a host loads
// it with stream/plugin and speaks the stream contract to it over gRPC. It
// is not meant to be run by hand.
package main

import (
	"github.com/stratastream/strata/drivers/s3"
	"github.com/stratastream/strata/stream/plugin"
)

func main() { plugin.Serve(s3.Open) }
