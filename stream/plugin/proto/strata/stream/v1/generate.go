// Package streamv1 is the Go code of the Strata plugin wire protocol,
// generated from stream.proto by ../../../gen.sh (docs/protocol.md states
// the rules every message follows). Only stream/plugin uses it; edit the
// .proto, never the generated files, and regenerate with
// `go generate ./stream/plugin/proto/...`. scripts/test-all checks that the
// committed code is what the .proto generates (gen.sh --check).
package streamv1

//go:generate ../../../gen.sh
