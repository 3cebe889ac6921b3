// Package broker is Strata's stateless Kafka-protocol broker: it serves the
// Kafka wire protocol (framed and encoded with franz-go's kmsg) on top of
// sharedlog partitions kept on any stream.Store, so that real Kafka clients
// produce and consume.
//
// Nothing is kept on local disk. The topic catalog, committed group offsets
// and producer-id blocks are streams on the store, next to the partitions:
//
//	CLUSTER/__brokers        one append per broker start: its offset+1 is the broker epoch
//	CLUSTER/__topics         topic catalog records (create, delete, partitions)
//	CLUSTER/__offsets        committed group offsets
//	CLUSTER/__producer_ids   producer-id blocks (sharedlog.AllocateProducerIDs)
//	CLUSTER/__acls           ACL records (create, delete), with ACLs enabled
//	CLUSTER/t/TOPICID/P      partition P of a topic (sharedlog: .../data, .../meta)
//
// A broker takes over a cluster by allocating an epoch above every earlier
// broker's and opening every stream read-write at that epoch, which fences
// the previous broker: its appends fail and it answers NOT_LEADER_OR_FOLLOWER
// from then on. Listeners may be secured (ServeListener: TLS, SASL PLAIN and
// SCRAM) and requests authorized by ACLs kept in CLUSTER/__acls
// (Config.Security). The package is not a replicated Kafka: one broker owns
// a cluster at a time, and transactions (a transaction coordinator), quotas
// and compacted topics are not provided.
package broker
