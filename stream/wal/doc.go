// Package wal turns any stream.Store into a Store of virtual streams that
// share one write-ahead stream (the WAL) per writer session, so that the
// backend writes of a session grow with its bytes, not with its streams:
// the appends of all its virtual streams within a linger window become one
// base append, one backend object per flush for the whole set.
//
// A virtual stream V is two base streams: V.meta, whose records say where
// V's tail is (which WAL, from which WAL offset), how far V.data holds V,
// and V's start; and V.data, which holds V's batches at V's own offsets
// once compaction has copied them there. Each session writes a WAL of its
// own and is its only writer; a new owner of V fences the WAL V's last
// record names, copies V's tail from it into V.data and only then appends
// to a WAL of its own. The rules (W1–W8) and their proof sketch are in
// docs/streamsets.md.
//
// The layer needs nothing of the base beyond the stream.Store contract, so
// it runs on every driver, in process or out of process. It is not a
// driver: a host wraps a driver's Store with NewStore.
package wal
