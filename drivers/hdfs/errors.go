package hdfs

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	gohdfs "github.com/colinmarc/hdfs/v2"

	"github.com/stratastream/strata/stream"
)

// Exception classes and messages of the NameNode the driver tells apart.
const (
	safeModeException = "org.apache.hadoop.hdfs.server.namenode.SafeModeException"
	// A file deleted after it was opened: the NameNode's answer to a
	// read's block locations (the open itself maps to fs.ErrNotExist).
	fileNotFoundException = "java.io.FileNotFoundException"
	// addBlock before the previous block of the file is reported.
	notReplicatedYetException = "org.apache.hadoop.hdfs.server.namenode.NotReplicatedYetException"
	// rename2 onto an existing object directory.
	msgDestNotEmpty = "rename destination directory is not empty"
	// rename2 of a directory onto a file (or the reverse).
	msgMustBothBeDirs = "must both be directories"
)

// remoteException returns the Java exception class and the first line of
// its message when err carries a NameNode or DataNode error.
func remoteException(err error) (class, msg string) {
	var re gohdfs.Error
	if errors.As(err, &re) {
		m, _, _ := strings.Cut(re.Message(), "\n")
		return re.Exception(), m
	}
	return "", ""
}

// isRemote reports whether err carries the remote exception class.
func isRemote(err error, class string) bool {
	c, _ := remoteException(err)
	return c == class
}

// cause explains err in a few words that name what went wrong: safe mode,
// permission, or the remote exception's first line.
func cause(err error) string {
	class, msg := remoteException(err)
	switch {
	case class == safeModeException || strings.Contains(msg, "safe mode"):
		return "NameNode is in safe mode (" + msg + ")"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied: " + err.Error()
	case class != "":
		return class + ": " + msg
	}
	return err.Error()
}

// unavailable wraps err as stream.ErrUnavailable, naming the operation and
// the key (or HDFS path).
func unavailable(op, key string, err error) error {
	if key != "" {
		return fmt.Errorf("%w: hdfs %s %s: %s", stream.ErrUnavailable, op, key, cause(err))
	}
	return fmt.Errorf("%w: hdfs %s: %s", stream.ErrUnavailable, op, cause(err))
}

// mapErr maps a client error of op on key to the contract: not found,
// already exists, or (anything else) unavailable.
func mapErr(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: hdfs %s %s", stream.ErrNotFound, op, key)
	case isRemote(err, fileNotFoundException):
		return fmt.Errorf("%w: hdfs %s %s (deleted while read)", stream.ErrNotFound, op, key)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%w: hdfs %s %s", stream.ErrAlreadyExists, op, key)
	}
	return unavailable(op, key, err)
}

// isNotEmpty: a non-recursive delete of a directory that has entries.
func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY)
}

// isTaken: a rename2 failed because its destination is an object already
// (a non-empty directory, or a file where a directory goes).
func isTaken(err error) bool {
	_, msg := remoteException(err)
	return strings.Contains(msg, msgDestNotEmpty) || strings.Contains(msg, msgMustBothBeDirs)
}
