package main

import (
	"context"
	"os"
	"testing"
)

// TestMain lets the test binary serve as the built-in drivers' process:
// resolveDriver starts os.Executable() (here, this test binary) as
// `driver-process NAME`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == driverProcessCommand {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
