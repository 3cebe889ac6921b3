# The entry points of the Strata repository, in one place. Every target is
# a thin wrapper: the command it runs is the one to use without make.
#
#   make              this list
#   make test-short   the fast tier: go test -short ./... (offline, Go only)
#   make test-all     the full tier: ./scripts/test-all (starts every backend; what CI runs)
#   make bench        bench/run: regenerates the measured part of docs/benchmarks.md
#   make generate     regenerates the plugin protocol code (go generate; needs protoc 3.21.12)
#   make serve        builds .bin/strata and runs `strata serve $(ARGS)`
#   make build        builds .bin/strata
#
# make serve runs the built binary, not go run: go run turns every failing
# exit status into 1, the binary keeps strata's own (0 ok, 1 a check failed,
# 2 bad usage or input).

GO ?= go
ARGS ?=

.PHONY: help test-short test-all bench generate serve build

help:
	@sed -n 's/^#   make/make/p' $(firstword $(MAKEFILE_LIST))

test-short:
	$(GO) test -short ./...

test-all:
	./scripts/test-all

bench:
	./bench/run

generate:
	$(GO) generate ./stream/plugin/proto/...

build:
	$(GO) build -o .bin/strata ./cmd/strata

serve: build
	.bin/strata serve $(ARGS)
