package cluster

import "go.uber.org/zap"

// zapNop is the etcd client's logger: the client logs through zap, and
// its retries are noise to a broker that reports etcd's state itself.
func zapNop() *zap.Logger { return zap.NewNop() }
