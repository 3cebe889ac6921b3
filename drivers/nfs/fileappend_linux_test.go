package nfs

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// fileAppendRunner: each writer loops write payload at the end of a file of
// its own, preallocated 1 GiB at a time, + fdatasync. The func closes the
// files.
func init() { fileAppendRunner = linuxFileAppendRunner }

func linuxFileAppendRunner(b testing.TB, dir string, payload []byte, writers int) (drivertest.Runner, func()) {
	const chunk = 1 << 30
	files := make([]*os.File, writers)
	ends := make([]int64, writers)
	for w := range writers {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(w)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		files[w] = f
	}
	return drivertest.LoopRunner(b, len(payload), writers, func(w, seq int) error {
			f := files[w]
			if ends[w]%chunk+int64(len(payload)) > chunk || ends[w] == 0 {
				// The next GiB, allocated and its size durable, outside
				// the appends (as a WAL file would be made ahead).
				if err := unix.Fallocate(int(f.Fd()), 0, ends[w], chunk); err != nil {
					return err
				}
				if err := f.Sync(); err != nil {
					return err
				}
			}
			if _, err := f.WriteAt(payload, ends[w]); err != nil {
				return err
			}
			ends[w] += int64(len(payload))
			return unix.Fdatasync(int(f.Fd()))
		}), func() {
			for _, f := range files {
				f.Close()
			}
		}
}
