// Package cluster coordinates the brokers of one Strata cluster through
// etcd v3: each broker registers under a lease, one is elected controller,
// and the controller assigns every partition to a live broker.
package cluster
