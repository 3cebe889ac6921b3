//go:build !linux

package nfs

import (
	"os"
	"syscall"
)

// directAlign: direct writes are used on Linux only.
func directAlign(*os.File) int { return 0 }

func writeDirect(*os.File, []byte) error { return syscall.EINVAL }
