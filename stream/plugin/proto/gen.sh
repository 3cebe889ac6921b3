#!/usr/bin/env bash
# Regenerates the Go code of the Strata plugin wire protocol from
# strata/stream/v1/stream.proto. The generated files are committed; run this
# only after changing the .proto.
#
# Needs (pinned so that the output is stable):
#   apt-get update && apt-get install -y protobuf-compiler     # protoc (3.21 on Debian 12)
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$(go env GOPATH)/bin:$PATH"
for tool in protoc protoc-gen-go protoc-gen-go-grpc; do
	command -v "$tool" >/dev/null || { echo "gen.sh: $tool not found; see the header of this script" >&2; exit 1; }
done
protoc -I . \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	strata/stream/v1/stream.proto
gofmt -l strata/stream/v1 >/dev/null
