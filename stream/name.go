package stream

import (
	"fmt"
	"strings"
)

// MaxNameLen is the longest stream name, in bytes.
const MaxNameLen = 255

// ValidateName reports whether name is a valid stream name: 1–255 bytes of
// [A-Za-z0-9._/-], no leading '/', and no empty, "." or ".." path element.
// The error wraps ErrInvalidArgument. Drivers call it before any I/O, so a
// name can never escape a driver's root.
func ValidateName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("%w: stream name must be 1-%d bytes, got %d", ErrInvalidArgument, MaxNameLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '/' || c == '-'
		if !ok {
			return fmt.Errorf("%w: stream name %q: byte %#x at %d is not in [A-Za-z0-9._/-]", ErrInvalidArgument, name, c, i)
		}
	}
	for _, el := range strings.Split(name, "/") {
		switch el {
		case "":
			return fmt.Errorf("%w: stream name %q has an empty path element (leading, trailing or double '/')", ErrInvalidArgument, name)
		case ".", "..":
			return fmt.Errorf("%w: stream name %q has a %q path element", ErrInvalidArgument, name, el)
		}
	}
	return nil
}
