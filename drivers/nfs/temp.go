package nfs

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Temp files are named <host>-<pid>-<random>-<n>.tmp, where host identifies
// this kernel and PID namespace (boot id and pid namespace inode), so that a
// Storage opening on the same host can tell the temp files of dead
// processes (torn by a crash mid-put) from those of live ones.

var (
	hostOnce sync.Once
	hostVal  string
)

// hostID names this kernel boot and PID namespace, without '-'.
func hostID() string {
	hostOnce.Do(func() {
		boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		id := strings.ReplaceAll(strings.TrimSpace(string(boot)), "-", "")
		if err != nil || id == "" {
			h, _ := os.Hostname()
			id = "h" + strings.NewReplacer("-", "", ".", "").Replace(h)
		}
		if len(id) > 16 {
			id = id[:16]
		}
		if ns, err := os.Readlink("/proc/self/ns/pid"); err == nil {
			// "pid:[4026531836]"
			ns = strings.TrimSuffix(strings.TrimPrefix(ns, "pid:["), "]")
			id += "." + ns
		}
		// Only the characters tempOwner accepts in a host.
		hostVal = strings.Map(func(r rune) rune {
			if r < 0x80 && isHostChar(byte(r)) {
				return r
			}
			return -1
		}, id)
	})
	return hostVal
}

// tempOwner parses a temp file name of the pattern above into its host
// and pid; ok is false for any other name (not a file of this driver).
func tempOwner(name string) (host string, pid int, ok bool) {
	parts := strings.Split(strings.TrimSuffix(name, tmpSuffix), "-")
	if len(parts) != 4 || !strings.HasSuffix(name, tmpSuffix) {
		return "", 0, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 || !allOf(parts[0], isHostChar) || !allOf(parts[1], isDigit) ||
		!allOf(parts[2], isHexDigit) || !allOf(parts[3], isDigit) {
		return "", 0, false
	}
	return parts[0], pid, true
}

func allOf(s string, f func(c byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !f(s[i]) {
			return false
		}
	}
	return s != ""
}

func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isHexDigit(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' }
func isHostChar(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.'
}

// processGone reports whether no process pid exists in this PID namespace.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// cleanTemp removes torn temp files: those of dead processes of this host
// at once, and anyone's older than maxAge. It removes only regular files
// whose names are this driver's temp names (tempOwner), in tmp/ itself:
// the directory is opened with O_NOFOLLOW and its entries are examined and
// removed relative to it (fstatat without following, unlinkat), so a tmp/
// that is a symlink, or a symlink in it, never leads out of the root, and
// nobody else's files are touched (with root "/", tmp/ is /tmp). Removing
// a live writer's temp file by mistake (a reused pid, a badly wrong clock)
// costs nothing but that put: its link then fails with ENOENT, reported as
// ErrUnavailable, and nothing was published.
func (s *Storage) cleanTemp(maxAge time.Duration) {
	fd, err := unix.Open(s.tmp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		s.log.Warn("not cleaning temp files: cannot open the temp directory (a symlink?)", "dir", s.tmp, "err", err)
		return
	}
	d := os.NewFile(uintptr(fd), s.tmp) // owns fd
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		s.log.Warn("cannot list temp files", "dir", s.tmp, "err", err)
		return
	}
	me := hostID()
	removed := 0
	for _, name := range names {
		host, pid, ok := tempOwner(name)
		if !ok {
			continue // not a temp file of this driver (nor an NFS client's .nfs file)
		}
		fi, err := statAt(fd, name)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if host == me && pid != os.Getpid() && processGone(pid) || time.Since(fi.ModTime()) > maxAge {
			if err := unix.Unlinkat(fd, name, 0); err == nil {
				removed++
			}
		}
	}
	if removed > 0 {
		s.log.Info("removed torn temp files", "count", removed, "dir", s.tmp)
	}
}

// statAt stats entry name of directory fd without following a symlink (an
// open with O_NOFOLLOW fails on one).
func statAt(dirfd int, name string) (os.FileInfo, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return f.Stat()
}
