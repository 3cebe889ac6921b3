package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinnedCopy reads binary once into a sealed in-memory file (memfd),
// checking the SHA-256 of the bytes read, and returns a read-only
// descriptor of it for the driver to run from.
func pinnedCopy(binary string, sum []byte) (*pinnedFile, error) {
	fd, err := unix.MemfdCreate("strata-driver:"+filepath.Base(binary), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("driver binary %s: memfd_create for its pinned copy: %w", binary, err)
	}
	mem := os.NewFile(uintptr(fd), "strata-driver-pinned")
	defer mem.Close()
	if err := copyPinned(binary, sum, mem); err != nil {
		return nil, err
	}
	if _, err := unix.FcntlInt(mem.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		return nil, fmt.Errorf("driver binary %s: sealing its pinned copy: %w", binary, err)
	}
	// A read-only descriptor, so that no writable one is open when it is
	// executed (execve refuses a file open for writing).
	ro, err := os.Open("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("driver binary %s: reopening its pinned copy: %w", binary, err)
	}
	return &pinnedFile{file: ro}, nil
}
