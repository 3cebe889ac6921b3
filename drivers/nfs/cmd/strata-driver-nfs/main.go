// Command strata-driver-nfs is the nfs driver as a plugin binary, loaded
// out-of-process by stream/plugin (plugin.Open). Not meant to be run by
// hand: it speaks go-plugin's handshake on stdout.
package main

import (
	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/stream/plugin"
)

func main() { plugin.Serve(nfs.Open) }
