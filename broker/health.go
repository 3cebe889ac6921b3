package broker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stratastream/strata/internal/cluster"
	"github.com/stratastream/strata/stream"
)

// DriverHealth is an optional interface of a Store's driver (Store.Driver)
// that runs apart from the broker and can be down for a while, such as a
// plugin.Supervisor, which restarts a driver process that died. While a
// store's driver is down the broker is not ready (/readyz answers 503 and
// strata_broker_ready is 0); strata_driver_up and
// strata_driver_restarts_total report it by driver name.
type DriverHealth interface {
	// DriverUp reports whether the driver serves the store now.
	DriverUp() bool
	// DriverRestarts is how many times the driver was restarted.
	DriverRestarts() int64
}

// driverStatus is the health of one driver, by name.
type driverStatus struct {
	name     string
	up       bool
	restarts int64
}

// namedStores are the broker's stores by driver name (default first), each
// store once.
func (b *Broker) namedStores() []struct {
	driver string
	store  *stream.Store
} {
	type named = struct {
		driver string
		store  *stream.Store
	}
	out := []named{{b.cfg.Driver, b.cfg.Store}}
	seen := map[*stream.Store]bool{b.cfg.Store: true}
	for _, r := range b.cfg.Routes {
		if r.Store == nil || seen[r.Store] {
			continue
		}
		seen[r.Store] = true
		d := r.Driver
		if d == "" {
			d = r.Store.Info().Driver
		}
		out = append(out, named{d, r.Store})
	}
	return out
}

// driverHealth is the health of the stores that report it, by name.
func (b *Broker) driverHealth() []driverStatus {
	var out []driverStatus
	for _, n := range b.namedStores() {
		if h, ok := n.store.Driver().(DriverHealth); ok {
			out = append(out, driverStatus{name: n.driver, up: h.DriverUp(), restarts: h.DriverRestarts()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// notReady says why the broker does not serve its partitions ("" when it
// does): closed, fenced, or a driver down.
func (b *Broker) notReady() string {
	switch {
	case b.closed.Load():
		return "closed"
	case b.fenced.Load():
		return "fenced by a newer broker of the cluster"
	case b.cl != nil && b.cl.m.Stats().Lease != cluster.LeaseHeld:
		return "etcd lease lost (etcd unreachable or without quorum); serving the partitions still owned"
	}
	var down []string
	for _, d := range b.driverHealth() {
		if !d.up {
			down = append(down, d.name)
		}
	}
	if len(down) > 0 {
		return fmt.Sprintf("driver %s down (restarting)", strings.Join(down, ", "))
	}
	return ""
}
