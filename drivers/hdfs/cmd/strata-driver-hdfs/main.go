// Command strata-driver-hdfs is the hdfs driver's plugin binary: a host
// loads it with stream/plugin and speaks the stream contract to it over
// gRPC. It is not meant to be run by hand.
package main

import (
	"github.com/stratastream/strata/drivers/hdfs"
	"github.com/stratastream/strata/stream/plugin"
)

func main() { plugin.Serve(hdfs.Open) }
