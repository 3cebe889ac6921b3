// Command profdriver is the memory driver with a CPU profile written to
// $STRATA_PROFDRIVER_OUT, for looking at where a driver process spends its
// time in the transport benchmark.
package main

import (
	"os"
	"runtime/pprof"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream/plugin"
)

func main() {
	if out := os.Getenv("STRATA_PROFDRIVER_OUT"); out != "" {
		f, err := os.Create(out)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	plugin.Serve(memory.Open)
}
