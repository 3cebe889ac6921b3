//go:build !race

package wal

const simRace = false
