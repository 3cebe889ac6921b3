//go:build !linux

package nfs

import (
	"os"
	"syscall"
)

// directAlign: direct writes are used on Linux only.
func directAlign(*os.File) int { return 0 }

func writeDirect(*os.File, []byte) (int, error) { return 0, syscall.EINVAL }

// preallocate: not on this platform (appends grow the file).
func preallocate(*os.File, int64, int64) error { return syscall.ENOTSUP }

// fdatasync is a full fsync on this platform.
func fdatasync(f *os.File) error { return f.Sync() }

// SharedFileSystem: told on Linux only.
func SharedFileSystem(string) string { return "" }

// punchHole: not on this platform (trimmed bytes stay until their segment
// is removed).
func punchHole(*os.File, int64, int64) error { return syscall.ENOTSUP }

func writeDirectAt(*os.File, []byte, int64) error { return syscall.EINVAL }

func writeDirectvAt(*os.File, [][]byte, int64) error { return syscall.EINVAL }

// renameNoReplace: not on this platform (a LogStore keeps no spare
// segments).
func renameNoReplace(int, string, string) error { return syscall.ENOTSUP }
