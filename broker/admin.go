package broker

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/sharedlog"
)

// metadata answers Metadata: this broker leads every partition.
func (b *Broker) metadata(r *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.nodeID, Host: b.host, Port: b.port}}
	view := b.clusterBrokers(resp)
	cluster := b.cfg.Cluster
	resp.ClusterID = &cluster
	resp.ControllerID = b.nodeID
	var topics []*topic
	if r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0) {
		topics = b.catalog.list()
	} else {
		for _, rt := range r.Topics {
			if rt.Topic == nil {
				st := kmsg.NewMetadataResponseTopic()
				st.TopicID = rt.TopicID
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			t := b.catalog.lookup(*rt.Topic)
			if t == nil && b.cfg.AutoCreateTopics && (r.Version < 4 || r.AllowAutoTopicCreation) {
				ctx, cancel := b.reqCtx(30 * time.Second)
				created, code, msg := b.catalog.create(ctx, *rt.Topic, -1, nil, false)
				cancel()
				if code != 0 && code != kerr.TopicAlreadyExists.Code {
					b.log.Warn("auto-creating topic failed", "topic", *rt.Topic, "code", errorFor(code), "msg", msg)
				}
				t = created
				if t == nil {
					t = b.catalog.lookup(*rt.Topic)
				}
			}
			if t == nil {
				st := kmsg.NewMetadataResponseTopic()
				st.Topic = rt.Topic
				st.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			topics = append(topics, t)
		}
	}
	for _, t := range topics {
		st := kmsg.NewMetadataResponseTopic()
		name := t.name
		st.Topic = &name
		st.TopicID = t.id
		n := b.catalog.numPartitions(t)
		for i := int32(0); i < n; i++ {
			sp := kmsg.NewMetadataResponseTopicPartition()
			sp.Partition = i
			p, _ := b.catalog.partitionOf(t.name, i)
			leader, epoch, ok := b.leaderOf(view, p)
			sp.Leader = leader
			sp.LeaderEpoch = epoch
			sp.Replicas = []int32{leader}
			sp.ISR = []int32{leader}
			if !ok || b.fenced.Load() {
				sp.ErrorCode = kerr.LeaderNotAvailable.Code
				sp.Leader = -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

func (b *Broker) createTopics(r *kmsg.CreateTopicsRequest, resp *kmsg.CreateTopicsResponse) (worst int16) {
	ctx, cancel := b.reqCtx(max(time.Duration(r.TimeoutMillis)*time.Millisecond, 30*time.Second))
	defer cancel()
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		cfg := map[string]string{}
		for _, c := range rt.Configs {
			if c.Value != nil {
				cfg[c.Name] = *c.Value
			}
		}
		var code int16
		var msg string
		switch {
		case len(rt.ReplicaAssignment) > 0:
			code, msg = kerr.InvalidReplicaAssignment.Code, "manual replica assignment is not supported: storage is shared"
		case rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1 && rt.ReplicationFactor < 1:
			code, msg = kerr.InvalidReplicationFactor.Code, "replication factor must be -1 or positive (replication is the storage's)"
		default:
			var t *topic
			t, code, msg = b.catalog.create(ctx, rt.Topic, rt.NumPartitions, cfg, r.ValidateOnly)
			if t != nil {
				st.TopicID = t.id
				st.NumPartitions = b.catalog.numPartitions(t)
				st.ReplicationFactor = 1
			}
		}
		st.ErrorCode = code
		if r.Version >= 1 {
			st.ErrorMessage = errString(msg)
		}
		if r.Version >= 5 {
			// Never null: the Java Admin client reads the list of every
			// topic it created (a null one is a NullPointerException).
			st.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
			if code == 0 {
				for _, e := range configEntries(topicConfigs, cfg) {
					c := kmsg.NewCreateTopicsResponseTopicConfig()
					c.Name, c.Value, c.Source = e.name, &e.value, int8(e.source)
					st.Configs = append(st.Configs, c)
				}
			}
		}
		if worst == 0 {
			worst = code
		}
		resp.Topics = append(resp.Topics, st)
	}
	return worst
}

func (b *Broker) deleteTopics(r *kmsg.DeleteTopicsRequest, resp *kmsg.DeleteTopicsResponse) {
	ctx, cancel := b.reqCtx(max(time.Duration(r.TimeoutMillis)*time.Millisecond, 30*time.Second))
	defer cancel()
	names := r.TopicNames
	for _, t := range r.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	for _, name := range names {
		st := kmsg.NewDeleteTopicsResponseTopic()
		n := name
		st.Topic = &n
		code, msg := b.catalog.remove(ctx, name)
		st.ErrorCode = code
		if r.Version >= 5 {
			st.ErrorMessage = errString(msg)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

func (b *Broker) createPartitions(r *kmsg.CreatePartitionsRequest, resp *kmsg.CreatePartitionsResponse) {
	ctx, cancel := b.reqCtx(max(time.Duration(r.TimeoutMillis)*time.Millisecond, 30*time.Second))
	defer cancel()
	for _, rt := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if len(rt.Assignment) > 0 {
			st.ErrorCode = kerr.InvalidReplicaAssignment.Code
			st.ErrorMessage = errString("manual replica assignment is not supported: storage is shared")
		} else {
			code, msg := b.catalog.grow(ctx, rt.Topic, rt.Count, r.ValidateOnly)
			st.ErrorCode, st.ErrorMessage = code, errString(msg)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

func (b *Broker) deleteRecords(r *kmsg.DeleteRecordsRequest, resp *kmsg.DeleteRecordsResponse) {
	ctx, cancel := b.reqCtx(max(time.Duration(r.TimeoutMillis)*time.Millisecond, 30*time.Second))
	defer cancel()
	for _, rt := range r.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if p, l, code := b.owned(rt.Topic, rp.Partition, -1); code != 0 {
				sp.ErrorCode = code
			} else if low, err := l.DeleteRecords(ctx, rp.Offset); err != nil {
				sp.ErrorCode = sharedlog.ErrorCode(err)
				p.failed(l, err)
			} else {
				sp.LowWatermark = low
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

func (b *Broker) listOffsets(r *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse) {
	ctx, cancel := b.reqCtx(30 * time.Second)
	defer cancel()
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
			if _, l, code := b.owned(rt.Topic, rp.Partition, rp.CurrentLeaderEpoch); code != 0 {
				sp.ErrorCode = code
			} else if off, err := l.ListOffsets(ctx, rp.Timestamp, sharedlog.Isolation(r.IsolationLevel)); err != nil {
				sp.ErrorCode = sharedlog.ErrorCode(err)
			} else {
				sp.Offset, sp.Timestamp, sp.LeaderEpoch = off.Offset, off.Timestamp, off.LeaderEpoch
				if r.Version == 0 {
					sp.OldStyleOffsets = []int64{off.Offset}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

func (b *Broker) offsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest, resp *kmsg.OffsetForLeaderEpochResponse) {
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			if _, l, code := b.owned(rt.Topic, rp.Partition, rp.CurrentLeaderEpoch); code != 0 {
				sp.ErrorCode = code
			} else {
				sp.LeaderEpoch, sp.EndOffset = l.OffsetForLeaderEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

func (b *Broker) describeConfigs(r *kmsg.DescribeConfigsRequest, resp *kmsg.DescribeConfigsResponse) {
	for _, rr := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var values map[string]string
		var set map[string]string
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := b.catalog.lookup(rr.ResourceName)
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Resources = append(resp.Resources, sr)
				continue
			}
			values, set = topicConfigs, t.configs
		case kmsg.ConfigResourceTypeBroker:
			values = map[string]string{
				"auto.create.topics.enable": strconv.FormatBool(b.cfg.AutoCreateTopics),
				"num.partitions":            strconv.Itoa(int(b.cfg.DefaultPartitions)),
				"socket.request.max.bytes":  strconv.Itoa(b.cfg.MaxRequestBytes),
				"broker.id":                 strconv.Itoa(int(b.nodeID)),
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		want := map[string]bool{}
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
		for _, e := range configEntries(values, set) {
			if len(want) > 0 && !want[e.name] {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.Source = e.name, &e.value, e.source
			c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
			c.ReadOnly = rr.ResourceType == kmsg.ConfigResourceTypeBroker
			sr.Configs = append(sr.Configs, c)
		}
		resp.Resources = append(resp.Resources, sr)
	}
}

func (b *Broker) initProducerID(r *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) int16 {
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		// No transaction coordinator (see findCoordinator).
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp.ErrorCode
	}
	if b.fenced.Load() {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp.ErrorCode
	}
	ctx, cancel := b.reqCtx(30 * time.Second)
	defer cancel()
	id, err := b.pids.get(ctx)
	if err != nil {
		b.log.Warn("allocating producer ids failed", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp.ErrorCode
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return 0
}

// findCoordinator answers FindCoordinator: this broker coordinates every
// group. There is no transaction coordinator: a transactional id gets
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients treat as fatal (as
// InitProducerId does), rather than a retriable COORDINATOR_NOT_AVAILABLE
// they would retry until their own timeout. It returns the worst error
// code, for metrics.
func (b *Broker) findCoordinator(r *kmsg.FindCoordinatorRequest, resp *kmsg.FindCoordinatorResponse) int16 {
	code, msg := int16(0), ""
	switch {
	case r.CoordinatorType == 1:
		code, msg = kerr.TransactionalIDAuthorizationFailed.Code, "transactions are not supported by this broker (no transaction coordinator)"
	case r.CoordinatorType != 0:
		code, msg = kerr.InvalidRequest.Code, fmt.Sprintf("unknown coordinator type %d", r.CoordinatorType)
	case b.fenced.Load():
		code, msg = kerr.CoordinatorNotAvailable.Code, "this broker was fenced by a newer one"
	}
	nodeID, host, port := b.nodeID, b.host, b.port
	if code == 0 && b.cl != nil {
		if n, ok := b.coordinator(); !ok {
			code, msg = kerr.CoordinatorNotAvailable.Code, "no broker holds the group offsets yet"
		} else if h, p, err := splitAddr(n.Addr); err == nil {
			nodeID, host, port = n.ID, h, p
		}
	}
	if r.Version >= 4 {
		for _, k := range r.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, kmsg.FindCoordinatorResponseCoordinator{
				Key: k, NodeID: nodeID, Host: host, Port: port, ErrorCode: code, ErrorMessage: errString(msg)})
		}
		return code
	}
	resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = code, nodeID, host, port
	if r.Version >= 1 {
		resp.ErrorMessage = errString(msg)
	}
	return code
}

// configEntry is one config of a topic or the broker as answered: its
// effective value and where that comes from.
type configEntry struct {
	name, value string
	source      kmsg.ConfigSource
}

// configEntries lists the configs of defaults by name, each with the value
// set overrides it with (a topic config) or its default.
func configEntries(defaults, set map[string]string) []configEntry {
	out := make([]configEntry, 0, len(defaults))
	for _, name := range sortedKeys(defaults) {
		e := configEntry{name: name, value: defaults[name], source: kmsg.ConfigSourceDefaultConfig}
		if v, ok := set[name]; ok {
			e.value, e.source = v, kmsg.ConfigSourceDynamicTopicConfig
		}
		out = append(out, e)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
