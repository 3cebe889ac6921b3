package nfs

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment of buffer address, file offset and length
// that O_DIRECT writes to f need, or 0 when f's file system refuses
// O_DIRECT. It asks statx(STATX_DIOALIGN) where the file system answers,
// and rounds up to 4 KiB (page-aligned buffers are the common case);
// otherwise it assumes 4 KiB, and a write it refuses later turns direct
// writes off (Storage.writeData).
func directAlign(f *os.File) int {
	align := 4096
	var st unix.Statx_t
	if err := statxFile(f, &st); err == nil && st.Mask&unix.STATX_DIOALIGN != 0 {
		if st.Dio_mem_align == 0 || st.Dio_offset_align == 0 {
			return 0 // the file system says: no direct I/O on this file
		}
		align = max(align, int(st.Dio_mem_align), int(st.Dio_offset_align))
		if align&(align-1) != 0 {
			return 0 // not a power of two: no file system does that; stay safe
		}
	}
	if setDirect(f, true) != nil {
		return 0
	}
	if setDirect(f, false) != nil {
		return 0
	}
	return align
}

func statxFile(f *os.File, st *unix.Statx_t) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.Statx(int(fd), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, st)
	}); err != nil {
		return err
	}
	return serr
}

// setDirect turns O_DIRECT on or off for f's open file description.
func setDirect(f *os.File, on bool) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := c.Control(func(fd uintptr) {
		var fl int
		if fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr != nil {
			return
		}
		if on {
			fl |= unix.O_DIRECT
		} else {
			fl &^= unix.O_DIRECT
		}
		_, ferr = unix.FcntlInt(fd, unix.F_SETFL, fl)
	}); err != nil {
		return err
	}
	return ferr
}

// writeDirect writes p (aligned as directAlign says) at f's offset with
// O_DIRECT, turns O_DIRECT off again whatever happens, and returns how
// many bytes it wrote.
func writeDirect(f *os.File, p []byte) (int, error) {
	if err := setDirect(f, true); err != nil {
		return 0, err
	}
	n, err := f.Write(p)
	if oerr := setDirect(f, false); err == nil {
		err = oerr
	}
	return n, err
}

// preallocate allocates n bytes of f from off, growing its size.
func preallocate(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), 0, off, n)
}

// fdatasync flushes f's data and what reading it back needs.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// SharedFileSystem names the network or FUSE file system that dir is on
// ("nfs", "cifs", "smb", "fuse"), or returns "" for a local one (or when
// it cannot tell). A LogStore's fence needs a new name seen at once by
// every process, which a client's cached lookups can break on these.
func SharedFileSystem(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return ""
	}
	switch uint32(st.Type) {
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	case unix.CIFS_SUPER_MAGIC:
		return "cifs"
	case unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC:
		return "smb"
	case unix.FUSE_SUPER_MAGIC:
		return "fuse"
	}
	return ""
}

// punchHole frees the blocks of f's bytes [off, off+n) (they read as
// zeros); the file keeps its size.
func punchHole(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// writeDirectAt writes p (aligned as directAlign says) at off of f with
// O_DIRECT, and turns O_DIRECT off again whatever happens.
func writeDirectAt(f *os.File, p []byte, off int64) error {
	if err := setDirect(f, true); err != nil {
		return err
	}
	_, err := f.WriteAt(p, off)
	if oerr := setDirect(f, false); err == nil {
		err = oerr
	}
	return err
}

// writeDirectvAt writes the buffers of iov (each aligned as directAlign
// says) one after the other from off of f, in one pwritev(2) with O_DIRECT,
// and turns O_DIRECT off again whatever happens. A short write is an
// error.
func writeDirectvAt(f *os.File, iov [][]byte, off int64) error {
	if err := setDirect(f, true); err != nil {
		return err
	}
	want := 0
	for _, b := range iov {
		want += len(b)
	}
	c, err := f.SyscallConn()
	if err == nil {
		var n int
		var werr error
		if err = c.Write(func(fd uintptr) bool {
			for {
				n, werr = unix.Pwritev(int(fd), iov, off)
				if werr != unix.EINTR {
					return true
				}
			}
		}); err == nil {
			err = werr
		}
		if err == nil && n != want {
			err = fmt.Errorf("pwritev wrote %d of %d bytes: %w", n, want, io.ErrShortWrite)
		}
	}
	if oerr := setDirect(f, false); err == nil {
		err = oerr
	}
	return err
}

// renameNoReplace renames old to new in the directory dirfd, failing if
// new exists (renameat2 RENAME_NOREPLACE).
func renameNoReplace(dirfd int, old, new string) error {
	return unix.Renameat2(dirfd, old, dirfd, new, unix.RENAME_NOREPLACE)
}
