//go:build race

package wal

// simRace says the race detector is on: it schedules goroutines so that
// a few schedules in a hundred do not replay step for step.
const simRace = true
