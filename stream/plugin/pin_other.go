//go:build !linux

package plugin

import (
	"fmt"
	"os"
	"path/filepath"
)

// pinnedCopy reads binary once into a private copy (a new 0700 directory),
// checking the SHA-256 of the bytes read, and returns the copy to run.
func pinnedCopy(binary string, sum []byte) (*pinnedFile, error) {
	dir, err := os.MkdirTemp("", "strata-driver-")
	if err != nil {
		return nil, fmt.Errorf("driver binary %s: directory for its pinned copy: %w", binary, err)
	}
	p := &pinnedFile{dir: dir, path: filepath.Join(dir, filepath.Base(binary))}
	f, err := os.OpenFile(p.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err == nil {
		err = copyPinned(binary, sum, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		p.remove()
		return nil, err
	}
	return p, nil
}
