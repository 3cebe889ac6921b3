// Command strata-driver-memory is the memory driver as an out-of-process
// plugin binary, loaded by hosts through stream/plugin.
package main

import (
	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream/plugin"
)

func main() { plugin.Serve(memory.Open) }
