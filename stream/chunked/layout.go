package chunked

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/stratastream/strata/stream"
)

// Object names (docs/engine.md, "Layout"). Every stream lives under its own
// root, "<name>.stream/", so that no stream's objects can be a path element
// of another stream's objects: stream names never produce a key element
// ending in ".stream" inside a root, and the engine's own elements (g, c, m,
// hint, x, incarnation ids, 20-digit numbers, page names) never end in it.
const (
	rootSuffix = ".stream/"
	genDir     = "g/"
	chunkDir   = "c/"
	manDir     = "m/"
	pageDir    = "x/"
	hintName   = "hint"
	seqDigits  = 20
)

// streamRoot is the prefix of every object of stream name.
func streamRoot(name string) string { return name + rootSuffix }

// genKey names generation n of stream name.
func genKey(name string, n uint64) string {
	return streamRoot(name) + genDir + seqName(n)
}

// incPrefix is the prefix of every object of incarnation inc.
func incPrefix(name, inc string) string { return streamRoot(name) + inc + "/" }

func seqName(n uint64) string { return fmt.Sprintf("%0*d", seqDigits, n) }

// layout names the objects of one incarnation.
type layout struct {
	name, inc, prefix string
	// seed binds the checksums of the incarnation's objects to it
	// (codec.go, boundFlag).
	seed uint32
}

func newLayout(name, inc string) layout {
	return layout{name: name, inc: inc, prefix: incPrefix(name, inc),
		seed: stream.Checksum([]byte("strata incarnation\x00" + name + "\x00" + inc))}
}

// genSeed binds the checksums of stream name's generations to it.
func genSeed(name string) uint32 {
	return stream.Checksum([]byte("strata generation\x00" + name))
}

func (l layout) chunk(seq uint64) string  { return l.prefix + chunkDir + seqName(seq) }
func (l layout) manifest(v uint64) string { return l.prefix + manDir + seqName(v) }
func (l layout) hint() string             { return l.prefix + hintName }
func (l layout) page(p pageRef) string {
	return l.prefix + pageDir + seqName(p.First) + "-" + hex.EncodeToString(p.ID[:])
}
func (l layout) chunkPrefix() string { return l.prefix + chunkDir }
func (l layout) String() string      { return l.prefix }
func (l layout) chunkSeq(key string) (uint64, bool) {
	return parseSeq(strings.TrimPrefix(key, l.chunkPrefix()))
}

func parseSeq(s string) (uint64, bool) {
	if len(s) != seqDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// nameFromGenKey returns the stream name of a generation key
// "<name>.stream/g/<n>" and its generation number.
func nameFromGenKey(key string) (string, uint64, bool) {
	i := strings.LastIndex(key, "/")
	if i < 0 {
		return "", 0, false
	}
	n, ok := parseSeq(key[i+1:])
	if !ok {
		return "", 0, false
	}
	rest := key[:i+1]
	if !strings.HasSuffix(rest, rootSuffix+genDir) {
		return "", 0, false
	}
	return strings.TrimSuffix(rest, rootSuffix+genDir), n, true
}

// validIncID reports whether id can be an incarnation id: a non-empty
// element of [A-Za-z0-9_-] (no '.', so it never ends in ".stream").
func validIncID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return id != "g" && id != "c" && id != "m" && id != "x"
}
