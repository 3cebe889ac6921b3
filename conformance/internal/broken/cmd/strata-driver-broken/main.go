// Command strata-driver-broken serves the deliberately broken memory
// drivers of package broken as a plugin binary, so that tests can show the
// `strata conformance` command failing. Its config is broken.Config as JSON.
package main

import (
	"github.com/stratastream/strata/conformance/internal/broken"
	"github.com/stratastream/strata/stream/plugin"
)

func main() { plugin.Serve(broken.Open) }
