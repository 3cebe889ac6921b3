package wal

// SetAckHook sets the hook run before acknowledged futures complete and
// returns a function that clears it.
func SetAckHook(f func()) (reset func()) {
	ackHook = f
	return func() { ackHook = nil }
}
