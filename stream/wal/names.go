package wal

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/stratastream/strata/stream"
)

// Base names. A virtual stream V has two base streams, V.meta and V.data,
// named V+".m" and V+".d"; each writer session has WAL streams named
// <prefix>/<session id>-<n>. No virtual stream's base name can be a WAL's
// (those end in ".m" or ".d", a WAL name in a hex digit), and the map from
// V to its base names is one to one.
//
// A name of more than stream.MaxNameLen-3 bytes has no room for the suffix
// (base names of that length are kept for hashed ones): such a V is stored under its first 188 bytes, a '.', the hex SHA-256 of the
// whole name (64 bytes) and the suffix, and its full name is kept in every
// V.meta record so that List can give it back.
const (
	metaSuffix = ".m"
	dataSuffix = ".d"
	hashedKeep = stream.MaxNameLen - 2 - 1 - 64
)

func hashed(name string) bool { return len(name)+len(metaSuffix) >= stream.MaxNameLen }

func baseName(name, suffix string) string {
	if !hashed(name) {
		return name + suffix
	}
	sum := sha256.Sum256([]byte(name))
	return fmt.Sprintf("%s.%x%s", name[:hashedKeep], sum, suffix)
}

func metaName(name string) string { return baseName(name, metaSuffix) }
func dataName(name string) string { return baseName(name, dataSuffix) }

// isHashedMeta says a base meta name is the hashed form of a long name.
func isHashedMeta(base string) bool {
	return len(base) == stream.MaxNameLen && strings.HasSuffix(base, metaSuffix)
}
