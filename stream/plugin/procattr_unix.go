//go:build unix

package plugin

import "syscall"

// newProcAttr gives a driver process a process group of its own.
func newProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGKILL to the process group of the driver process pid.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
