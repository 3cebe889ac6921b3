// Command strata is the Strata CLI: it starts a Kafka-protocol broker on
// shared storage, runs the conformance suite against a driver, and lists
// drivers.
//
//	strata serve                   a Kafka-protocol broker (nfs driver on ./strata-data by default)
//	strata drivers                 list built-in drivers and plugin binaries
//	strata conformance --driver D  run the conformance suite on a driver
//	strata soak --driver D         the fencing soak, with an independent verifier
//	strata bench                   benchmark workloads on a driver or a broker
//	strata sasl-credential         the stored SCRAM credentials of a SASL user
//	strata version                 print the version
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/stratastream/strata/internal/redact"
)

// version is the CLI's version string.
const version = "0.1.0"

const usage = `strata: Kafka-style partitions on shared storage.

Usage:
  strata serve [--config FILE] [--listen HOST:PORT] [--data DIR]
                                 a Kafka-protocol broker on shared storage; without --config the
                                 nfs driver on the --data directory (see strata serve -h)
  strata drivers [--json]        built-in drivers and plugin binaries on $STRATA_PLUGIN_DIR, with their Info
  strata conformance --driver NAME|PATH [flags]
                                 run the conformance suite against a driver (see strata conformance -h)
  strata soak --driver NAME|PATH [flags]
                                 race owners with increasing epochs and verify every ack (see strata soak -h)
  strata bench [flags]           benchmark workloads on a driver or a broker (see strata bench -h)
  strata sasl-credential --user NAME < password
                                 print the stored (salted, hashed) SCRAM credentials of a SASL user
  strata version                 print the version
  strata help [COMMAND]          this text, or a command's usage (as strata COMMAND --help)

Exit status: 0 success, 1 a check or workload failed, 2 bad usage or input.
Under go run every failure exits 1 (go run prints "exit status N"): build
the binary (go build -o strata ./cmd/strata) to see the real one.

`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a command line and returns the exit code: 0 success, 1 a
// check failed, 2 bad usage or input.
//
// Everything it prints passes through redact.Writer: no URL password from a
// config (an s3 endpoint http://user:password@host) reaches the output, an
// error or a log line of any command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	stdout, stderr = redact.Writer(stdout), redact.Writer(stderr)
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "drivers":
		return runDrivers(ctx, args[1:], stdout, stderr)
	case "conformance":
		return runConformance(ctx, args[1:], stdout, stderr)
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "soak":
		return runSoak(ctx, args[1:], stdout, stderr)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "sasl-credential":
		return runSASLCredential(ctx, args[1:], stdinOf, stdout, stderr)
	case driverProcessCommand:
		return runDriverProcess(args[1:], stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "strata", version)
		return 0
	case "help", "-h", "--help":
		if args[0] == "help" && len(args) > 1 {
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "strata: unknown command %q\n\n%s", args[0], usage)
	return 2
}
