package nfs

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/stratastream/strata/stream"
)

// On-disk layout under Config.Root:
//
//	objects/   one file per key
//	tmp/       temp files of puts in progress: <host>-<pid>-<random>-<n>.tmp
//	wal/       a LogStore (LogStoreDir), when stream sets keep their WALs
//	           there (strata serve's embedded default)
//
// A key "a/b/c" is the file objects/a@/b@/c: every directory element gets a
// '@' suffix, a byte keys cannot hold, so a key and keys below it ("a/b"
// and "a/b/c") never collide as file and directory.
// LogStoreDir is where a LogStore beside the driver's objects lives.
func LogStoreDir(root string) string { return filepath.Join(root, "wal") }

const (
	objectsDir = "objects"
	tmpDir     = "tmp"
	dirSuffix  = "@"
	tmpSuffix  = ".tmp"
	// maxKeyLen bounds a key; maxElemLen bounds one element (NAME_MAX 255,
	// less the directory suffix).
	maxKeyLen  = 1024
	maxElemLen = 254
)

// validKey checks key before any file is touched: 1..maxKeyLen bytes of
// [A-Za-z0-9._/-], no leading or trailing '/', no empty, "." or ".."
// element. So no key can leave the root: no absolute path, no "..", no NUL.
func validKey(key string) error {
	if len(key) == 0 || len(key) > maxKeyLen {
		return fmt.Errorf("%w: nfs key %q: must be 1-%d bytes, got %d", stream.ErrInvalidArgument, key, maxKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-') {
			return fmt.Errorf("%w: nfs key %q: byte %#x at %d is not in [A-Za-z0-9._/-]", stream.ErrInvalidArgument, key, c, i)
		}
	}
	for el := range strings.SplitSeq(key, "/") {
		switch {
		case el == "":
			return fmt.Errorf("%w: nfs key %q has an empty path element", stream.ErrInvalidArgument, key)
		case el == "." || el == "..":
			return fmt.Errorf("%w: nfs key %q has a %q path element", stream.ErrInvalidArgument, key, el)
		case len(el) > maxElemLen:
			return fmt.Errorf("%w: nfs key %q has an element of %d bytes (max %d)", stream.ErrInvalidArgument, key, len(el), maxElemLen)
		}
	}
	return nil
}

// validPrefix checks a List prefix: "" or a valid key followed by '/'.
func validPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	p, ok := strings.CutSuffix(prefix, "/")
	if !ok {
		return fmt.Errorf("%w: nfs list prefix %q must be empty or end with '/'", stream.ErrInvalidArgument, prefix)
	}
	return validKey(p)
}

// keyPath is the file of a valid key, relative to the root.
func keyPath(key string) string {
	els := strings.Split(key, "/")
	for i := range len(els) - 1 {
		els[i] += dirSuffix
	}
	return filepath.Join(objectsDir, filepath.Join(els...))
}

// prefixDir is the directory of a valid, non-empty List prefix ("a/b/"),
// relative to the root.
func prefixDir(prefix string) string {
	els := strings.Split(strings.TrimSuffix(prefix, "/"), "/")
	for i := range els {
		els[i] += dirSuffix
	}
	return filepath.Join(objectsDir, filepath.Join(els...))
}
