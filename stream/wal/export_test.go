package wal

// SetAckHook sets the hook run before acknowledged futures complete and
// returns a function that clears it.
func SetAckHook(f func()) (reset func()) {
	ackHook = f
	return func() { ackHook = nil }
}

// SetSettleHook sets the hook run when a settle has taken over its ended
// WAL and not yet appended its taken-back entries again.
func SetSettleHook(f func(stream string)) (reset func()) {
	settleHook = func(h *vstream) { f(h.name) }
	return func() { settleHook = nil }
}
