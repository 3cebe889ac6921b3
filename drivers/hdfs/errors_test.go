package hdfs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stratastream/strata/stream"
)

// remoteErr is a NameNode error as the client reports it.
type remoteErr struct{ class, msg string }

func (e remoteErr) Error() string     { return e.class + ": " + e.msg }
func (e remoteErr) Method() string    { return "getBlockLocations" }
func (e remoteErr) Desc() string      { return "" }
func (e remoteErr) Exception() string { return e.class }
func (e remoteErr) Message() string   { return e.msg }

// TestMapErrFileDeletedWhileRead: a read of a file deleted after it was
// opened gets the NameNode's FileNotFoundException from its block
// locations; that is ErrNotFound (a WAL chunk trimmed under a reader,
// who then reads the record again), not ErrUnavailable. Other remote
// exceptions stay ErrUnavailable.
func TestMapErrFileDeletedWhileRead(t *testing.T) {
	gone := fmt.Errorf("read: %w", remoteErr{fileNotFoundException, "File does not exist: /x/c/1"})
	if err := mapErr("get", "c/1", gone); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("FileNotFoundException mid-read: %v; want ErrNotFound", err)
	}
	other := remoteErr{"java.io.IOException", "DataNode went away"}
	if err := mapErr("get", "c/1", other); !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("IOException mid-read: %v; want ErrUnavailable", err)
	}
}
