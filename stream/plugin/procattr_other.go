//go:build !unix

package plugin

import "syscall"

// newProcAttr: no process groups here.
func newProcAttr() *syscall.SysProcAttr { return nil }

// killGroup: no process groups here; the process itself is killed.
func killGroup(int) {}
