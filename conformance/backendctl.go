package conformance

import (
	"path/filepath"
	"strings"
)

// DirectoryCtl is a stock Harness.BackendCtl (and --backend-ctl) for a
// driver whose backend is a directory, local or mounted: `stop` renames
// dir to dir.stopped, so that every open, link and read under dir fails as
// on an unreachable mount, and `start` renames it back, data intact. Both
// are idempotent. The driver must report the missing directory as
// stream.ErrUnavailable, never as ErrNotFound, and must never recreate it
// (make only what lies below it, relative to it: examples/dirstore opens
// it with os.OpenRoot); start fails when it finds both dir and
// dir.stopped.
//
// The contract of any BackendCtl: the suite runs `CMD stop` and `CMD
// start` through sh -c, with the action appended as the last word, and
// waits for each to exit 0. After stop, calls on the backend fail
// ErrUnavailable within Harness.UnavailableWithin; after start, the
// backend holds everything acknowledged before the stop.
func DirectoryCtl(dir string) string {
	d := filepath.Clean(dir)
	q, qs := shellQuote(d), shellQuote(d+".stopped")
	return "strata_dirctl() { case \"$1\" in " +
		"stop) if [ -e " + q + " ]; then [ ! -e " + qs + " ] && mv " + q + " " + qs + "; else [ -e " + qs + " ]; fi ;; " +
		"start) if [ -e " + qs + " ]; then [ ! -e " + q + " ] && mv " + qs + " " + q + "; else [ -e " + q + " ]; fi ;; " +
		"*) echo 'usage: stop|start' >&2; return 2 ;; esac; }; strata_dirctl"
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
