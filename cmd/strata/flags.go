package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet is the flag set of the subcommand name, whose usage is text
// followed by the flags' defaults. The usage goes to the flag set's output:
// stderr, except when asked for (parseFlags).
func newFlagSet(name, text string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), text)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs. Asked for help (-h, -help, --help), it
// prints the usage on stdout and is done with exit code 0; a bad flag is
// named on stderr with the usage after it, done with exit code 2.
// Otherwise done is false and the subcommand goes on.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (done bool, code int) {
	usage := fs.Usage
	fs.Usage = func() {} // printed below, on the stream it belongs to
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case err == nil:
		return false, 0
	case errors.Is(err, flag.ErrHelp):
		out := fs.Output()
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(out)
		return true, 0
	default: // flag has printed the error on fs.Output()
		fs.Usage()
		return true, 2
	}
}
