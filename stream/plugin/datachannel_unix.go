//go:build unix

package plugin

import (
	"fmt"
	"os"
	"syscall"
)

// newDataPair creates the socket pair. Both ends are close-on-exec (set
// under syscall.ForkLock, so no concurrent exec inherits them); exec clears
// that flag on the one passed in ExtraFiles.
func newDataPair() (*dataPair, error) {
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("socketpair for the data channel: %w", err)
	}
	return &dataPair{
		host:  os.NewFile(uintptr(fds[0]), "strata-data-host"),
		child: os.NewFile(uintptr(fds[1]), "strata-data-driver"),
	}, nil
}
