package nfs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
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
		hostVal = id
	})
	return hostVal
}

// tempOwner parses a temp file name into its host and pid.
func tempOwner(name string) (host string, pid int, ok bool) {
	parts := strings.Split(strings.TrimSuffix(name, tmpSuffix), "-")
	if len(parts) != 4 || !strings.HasSuffix(name, tmpSuffix) {
		return "", 0, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return "", 0, false
	}
	return parts[0], pid, true
}

// processGone reports whether no process pid exists in this PID namespace.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// cleanTemp removes torn temp files: those of dead processes of this host
// at once, and anyone's older than maxAge. Removing a live writer's temp
// file by mistake (a reused pid, a badly wrong clock) costs nothing but that
// put: its link then fails with ENOENT, reported as ErrUnavailable, and
// nothing was published.
func (s *Storage) cleanTemp(maxAge time.Duration) {
	d, err := os.Open(s.tmp)
	if err != nil {
		s.log.Warn("cannot list temp files", "dir", s.tmp, "err", err)
		return
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		s.log.Warn("cannot list temp files", "dir", s.tmp, "err", err)
		return
	}
	me := hostID()
	removed := 0
	for _, name := range names {
		if strings.HasPrefix(name, ".nfs") {
			continue // an NFS client's silly-renamed open file: not ours to remove
		}
		path := filepath.Join(s.tmp, name)
		torn := false
		if host, pid, ok := tempOwner(name); ok && host == me && pid != os.Getpid() && processGone(pid) {
			torn = true
		} else if fi, err := os.Lstat(path); err == nil && time.Since(fi.ModTime()) > maxAge {
			torn = true
		}
		if torn {
			if err := os.Remove(path); err == nil {
				removed++
			}
		}
	}
	if removed > 0 {
		s.log.Info("removed torn temp files", "count", removed, "dir", s.tmp)
	}
}
