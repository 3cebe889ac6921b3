package plugin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/stratastream/strata/stream"
)

// pinnedFile holds the bytes of a pinned driver binary that were checked:
// a sealed in-memory file the driver runs from (/proc/self/fd/N in the
// child) on Linux, else a private copy at path.
type pinnedFile struct {
	file *os.File // passed to the driver (Linux); nil elsewhere
	path string   // the private copy (not Linux)
	dir  string   // removed with the copy
}

// closeFile closes the host's descriptor of the in-memory file.
func (p *pinnedFile) closeFile() {
	if p.file != nil {
		_ = p.file.Close()
	}
}

// remove deletes the private copy, if any.
func (p *pinnedFile) remove() {
	p.closeFile()
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

// copyPinned reads binary once into dst (the file the driver runs from),
// hashing the same bytes, and fails unless their SHA-256 is sum.
func copyPinned(binary string, sum []byte, dst io.Writer) error {
	f, err := os.Open(binary)
	if err != nil {
		return fmt.Errorf("%w: driver binary %s: %v", stream.ErrInvalidArgument, binary, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(h, dst), f); err != nil {
		return fmt.Errorf("driver binary %s: reading it for its checksum: %w", binary, err)
	}
	if got := h.Sum(nil); subtle.ConstantTimeCompare(got, sum) != 1 {
		return fmt.Errorf("%w: driver binary %s: checksum mismatch: sha256 %s, pinned %s", stream.ErrInvalidArgument, binary, hex.EncodeToString(got), hex.EncodeToString(sum))
	}
	return nil
}
