//go:build linux || darwin || freebsd || netbsd || openbsd

package hdfs

import (
	"net"
	"syscall"
)

// peerGone reports whether the peer of c has reset or closed it, i.e. a
// read would fail or see EOF now, without consuming anything or waiting:
// a non-blocking MSG_PEEK. It does not take the connection's read lock
// (Control, not Read), so it never waits for a read in progress.
func peerGone(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return true
	}
	gone := false
	err = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			gone = n == 0 // EOF
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR:
			// nothing to read: alive
		default:
			gone = true // reset
		}
	})
	return err != nil || gone
}
