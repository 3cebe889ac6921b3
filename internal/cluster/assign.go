package cluster

import (
	"slices"
	"sort"
)

// Assign maps every unit to one of nodes, keeping current owners where it
// can (sticky) and giving no node more than ceil(len(units)/len(nodes))
// units (balanced). It is deterministic and does no I/O. With no nodes it
// returns an empty map. current may name nodes that are gone; their units
// move.
func Assign(units []string, nodes []int32, current map[string]int32) map[string]int32 {
	out := make(map[string]int32, len(units))
	if len(nodes) == 0 {
		return out
	}
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	units = slices.Clone(units)
	sort.Strings(units)
	units = slices.Compact(units)
	limit := (len(units) + len(nodes) - 1) / len(nodes)
	// The nodes with more than the floor share may keep one unit over it:
	// extra counts how many of them may still hold limit units.
	floor := len(units) / len(nodes)
	extra := len(units) - floor*len(nodes)
	load := make(map[int32]int, len(nodes))
	alive := make(map[int32]bool, len(nodes))
	for _, n := range nodes {
		alive[n] = true
	}
	var free []string
	for _, u := range units {
		n, ok := current[u]
		if !ok || !alive[n] || load[n] >= limit || (load[n] == floor && extra == 0) {
			free = append(free, u)
			continue
		}
		if load[n] == floor {
			extra--
		}
		load[n]++
		out[u] = n
	}
	for _, u := range free {
		best := int32(-1)
		for _, n := range nodes {
			if load[n] >= limit || (load[n] == floor && extra == 0) {
				continue
			}
			if best < 0 || load[n] < load[best] {
				best = n
			}
		}
		if load[best] == floor {
			extra--
		}
		load[best]++
		out[u] = best
	}
	return out
}
