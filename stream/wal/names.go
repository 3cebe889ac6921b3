package wal

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/stratastream/strata/stream"
)

// Base names. A virtual stream V has two base streams, V.meta and V.data,
// named V+".m" and V+"."+tag+".d", where tag is the incarnation's: the
// first 8 bytes of its id in hex, so that no incarnation ever writes a
// data stream another one may still delete (an incarnation created by
// an earlier build, whose records carry no tag, has V+".d"). Each writer
// session has WAL streams named <prefix>/<session id>-<n>. No virtual
// stream's base name can be a WAL's (those end in ".m" or ".d", a WAL name
// in a hex digit), and the map from V and an incarnation to base names is
// one to one (a tag has a fixed length).
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

// legacyDataName is the data stream of an incarnation whose records carry
// no tag.
func legacyDataName(name string) string { return baseName(name, dataSuffix) }

// tagLen is the hex digits of an incarnation's tag in its data name.
const tagLen = 16

// dataName is the data stream of V's incarnation inc. A name too long for
// the tagged suffix is stored in the hashed form, 255 bytes long, as
// long meta names are (a shorter one never is: the lengths keep the two
// forms apart).
func dataName(name string, inc id) string {
	suffix := fmt.Sprintf(".%x%s", inc[:tagLen/2], dataSuffix)
	if len(name)+len(suffix) < stream.MaxNameLen {
		return name + suffix
	}
	sum := sha256.Sum256([]byte(name))
	return fmt.Sprintf("%s.%x%s", name[:stream.MaxNameLen-len(suffix)-1-64], sum, suffix)
}

// dataPrefix is what the names dataName gives V start with.
func dataPrefix(name string) string {
	if len(name)+1+tagLen+len(dataSuffix) < stream.MaxNameLen {
		return name + "."
	}
	return dataName(name, id{})[:stream.MaxNameLen-tagLen-len(dataSuffix)]
}

// isDataOf says base is a data stream of V, of any incarnation (tagged,
// or the legacy name).
func isDataOf(base, name string) bool {
	if base == legacyDataName(name) {
		return true
	}
	p := dataPrefix(name)
	tag, ok := strings.CutSuffix(strings.TrimPrefix(base, p), dataSuffix)
	return ok && strings.HasPrefix(base, p) && len(tag) == tagLen && strings.Trim(tag, "0123456789abcdef") == ""
}

// dataName is the data stream the record's incarnation writes.
func (r *record) dataName() string {
	if !r.tagged {
		return legacyDataName(r.name)
	}
	return dataName(r.name, r.inc)
}

// isHashedMeta says a base meta name is the hashed form of a long name.
func isHashedMeta(base string) bool {
	return len(base) == stream.MaxNameLen && strings.HasSuffix(base, metaSuffix)
}
