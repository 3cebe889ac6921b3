package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Resource-type and operation shorthands of the checks below.
const (
	rTopic   = kmsg.ACLResourceTypeTopic
	rGroup   = kmsg.ACLResourceTypeGroup
	rCluster = kmsg.ACLResourceTypeCluster

	opRead     = kmsg.ACLOperationRead
	opWrite    = kmsg.ACLOperationWrite
	opCreate   = kmsg.ACLOperationCreate
	opDelete   = kmsg.ACLOperationDelete
	opAlter    = kmsg.ACLOperationAlter
	opDescribe = kmsg.ACLOperationDescribe
)

// clusterName is the name of the cluster resource in ACLs (Kafka's).
const clusterName = "kafka-cluster"

var (
	topicDenied   = kerr.TopicAuthorizationFailed.Code
	groupDenied   = kerr.GroupAuthorizationFailed.Code
	clusterDenied = kerr.ClusterAuthorizationFailed.Code
)

// handle authorizes a decoded request and dispatches it. With ACLs on,
// topics the principal may not touch are taken out of the request and
// answered with TOPIC_AUTHORIZATION_FAILED, and a request on a group or
// the cluster it may not touch is answered with the group or cluster
// error without being handled: no data is read or written for it.
func (b *Broker) handle(cc *conn, p *pending, req kmsg.Request, resp kmsg.Response) func() kmsg.Response {
	refuse := func(code int16) func() kmsg.Response {
		return func() kmsg.Response { b.metrics.request(req.Key(), code); return resp }
	}
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp.(*kmsg.SASLHandshakeResponse).ErrorCode = kerr.IllegalSaslState.Code
		return refuse(kerr.IllegalSaslState.Code)
	case *kmsg.SASLAuthenticateRequest:
		rr := resp.(*kmsg.SASLAuthenticateResponse)
		rr.ErrorCode, rr.ErrorMessage = kerr.IllegalSaslState.Code, errString("no SASL exchange on this connection (a plaintext listener, or already authenticated)")
		return refuse(kerr.IllegalSaslState.Code)
	case *kmsg.CreateACLsRequest, *kmsg.DescribeACLsRequest, *kmsg.DeleteACLsRequest:
		if b.acls == nil {
			return refuse(fillACLError(req, resp, kerr.SecurityDisabled.Code, "authorization is not enabled on this broker"))
		}
		op := opAlter
		if _, ok := r.(*kmsg.DescribeACLsRequest); ok {
			op = opDescribe
		}
		if !b.acls.allowed(cc.principal, remoteIP(cc.c), rCluster, clusterName, op) {
			return refuse(fillACLError(req, resp, clusterDenied, ""))
		}
		return func() kmsg.Response {
			var code int16
			switch r := req.(type) {
			case *kmsg.CreateACLsRequest:
				code = b.createACLs(r, resp.(*kmsg.CreateACLsResponse))
			case *kmsg.DescribeACLsRequest:
				b.describeACLs(r, resp.(*kmsg.DescribeACLsResponse))
			case *kmsg.DeleteACLsRequest:
				code = b.deleteACLs(r, resp.(*kmsg.DeleteACLsResponse))
			}
			b.metrics.request(req.Key(), code)
			return resp
		}
	}
	if b.acls == nil {
		return b.withAdvertise(cc, b.dispatch(cc, p, req, resp))
	}
	z := authz{b: b, principal: cc.principal, host: remoteIP(cc.c)}
	code, post := z.check(req, resp)
	if code != 0 {
		return refuse(code)
	}
	finish := b.withAdvertise(cc, b.dispatch(cc, p, req, resp))
	if post == nil {
		return finish
	}
	return func() kmsg.Response {
		out := finish()
		if out != nil {
			post()
		}
		return out
	}
}

// fillACLError answers an ACL API request with code.
func fillACLError(req kmsg.Request, resp kmsg.Response, code int16, msg string) int16 {
	switch rr := resp.(type) {
	case *kmsg.DescribeACLsResponse:
		rr.ErrorCode, rr.ErrorMessage = code, errString(msg)
	case *kmsg.CreateACLsResponse:
		for range req.(*kmsg.CreateACLsRequest).Creations {
			rr.Results = append(rr.Results, kmsg.CreateACLsResponseResult{ErrorCode: code, ErrorMessage: errString(msg)})
		}
	case *kmsg.DeleteACLsResponse:
		for range req.(*kmsg.DeleteACLsRequest).Filters {
			rr.Results = append(rr.Results, kmsg.DeleteACLsResponseResult{ErrorCode: code, ErrorMessage: errString(msg)})
		}
	}
	return code
}

// authz checks one request of a principal.
type authz struct {
	b         *Broker
	principal string
	host      string
}

func (z authz) may(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) bool {
	return z.b.acls.allowed(z.principal, z.host, rt, name, op)
}

// split keeps in *items those whose name the principal may do op on and
// returns the others.
func split[T any](z authz, items *[]T, name func(*T) string, op kmsg.ACLOperation) []T {
	var kept, denied []T
	for i := range *items {
		if z.may(rTopic, name(&(*items)[i]), op) {
			kept = append(kept, (*items)[i])
		} else {
			denied = append(denied, (*items)[i])
		}
	}
	if denied != nil {
		*items = kept
	}
	return denied
}

// check authorizes req: a non-zero code refuses it whole (resp already
// carries the error); post, when not nil, adds the refused parts to the
// response once the rest was handled.
func (z authz) check(req kmsg.Request, resp kmsg.Response) (int16, func()) {
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		return 0, nil
	case *kmsg.ProduceRequest:
		denied := split(z, &r.Topics, func(t *kmsg.ProduceRequestTopic) string { return t.Topic }, opWrite)
		if denied == nil {
			return 0, nil
		}
		return 0, func() {
			rr := resp.(*kmsg.ProduceResponse)
			for _, t := range denied {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewProduceResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, topicDenied
					rt.Partitions = append(rt.Partitions, rp)
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}
	case *kmsg.FetchRequest:
		denied := split(z, &r.Topics, func(t *kmsg.FetchRequestTopic) string { return t.Topic }, opRead)
		if denied == nil {
			return 0, nil
		}
		return 0, func() {
			rr := resp.(*kmsg.FetchResponse)
			for _, t := range denied {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.HighWatermark, rp.LastStableOffset = p.Partition, topicDenied, -1, -1
					rp.RecordBatches = []byte{} // librdkafka rejects a null record set
					rt.Partitions = append(rt.Partitions, rp)
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}
	case *kmsg.ListOffsetsRequest:
		denied := split(z, &r.Topics, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic }, opDescribe)
		if denied == nil {
			return 0, nil
		}
		return 0, func() {
			rr := resp.(*kmsg.ListOffsetsResponse)
			for _, t := range denied {
				rt := kmsg.NewListOffsetsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewListOffsetsResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, topicDenied
					rt.Partitions = append(rt.Partitions, rp)
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		denied := split(z, &r.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic }, opDescribe)
		if denied == nil {
			return 0, nil
		}
		return 0, func() {
			rr := resp.(*kmsg.OffsetForLeaderEpochResponse)
			for _, t := range denied {
				rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, topicDenied, -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}
	case *kmsg.DeleteRecordsRequest:
		denied := split(z, &r.Topics, func(t *kmsg.DeleteRecordsRequestTopic) string { return t.Topic }, opDelete)
		if denied == nil {
			return 0, nil
		}
		return 0, func() {
			rr := resp.(*kmsg.DeleteRecordsResponse)
			for _, t := range denied {
				rt := kmsg.NewDeleteRecordsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewDeleteRecordsResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, topicDenied, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}
	case *kmsg.MetadataRequest:
		return 0, z.metadata(r, resp.(*kmsg.MetadataResponse))
	case *kmsg.CreateTopicsRequest:
		if z.may(rCluster, clusterName, opCreate) {
			return 0, nil
		}
		denied := split(z, &r.Topics, func(t *kmsg.CreateTopicsRequestTopic) string { return t.Topic }, opCreate)
		if denied == nil {
			return 0, nil
		}
		return 0, func() {
			rr := resp.(*kmsg.CreateTopicsResponse)
			for _, t := range denied {
				rt := kmsg.NewCreateTopicsResponseTopic()
				rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, topicDenied, -1, -1
				rr.Topics = append(rr.Topics, rt)
			}
		}
	case *kmsg.DeleteTopicsRequest:
		denied := split(z, &r.TopicNames, func(t *string) string { return *t }, opDelete)
		deniedT := split(z, &r.Topics, func(t *kmsg.DeleteTopicsRequestTopic) string { return strOr(t.Topic) }, opDelete)
		if denied == nil && deniedT == nil {
			return 0, nil
		}
		for _, t := range deniedT {
			denied = append(denied, strOr(t.Topic))
		}
		return 0, func() {
			rr := resp.(*kmsg.DeleteTopicsResponse)
			for _, t := range denied {
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = kmsg.StringPtr(t), topicDenied
				rr.Topics = append(rr.Topics, rt)
			}
		}
	case *kmsg.CreatePartitionsRequest:
		denied := split(z, &r.Topics, func(t *kmsg.CreatePartitionsRequestTopic) string { return t.Topic }, opAlter)
		if denied == nil {
			return 0, nil
		}
		return 0, func() {
			rr := resp.(*kmsg.CreatePartitionsResponse)
			for _, t := range denied {
				rt := kmsg.NewCreatePartitionsResponseTopic()
				rt.Topic, rt.ErrorCode = t.Topic, topicDenied
				rr.Topics = append(rr.Topics, rt)
			}
		}
	case *kmsg.DescribeConfigsRequest:
		var kept, denied []kmsg.DescribeConfigsRequestResource
		for _, res := range r.Resources {
			ok := true
			switch res.ResourceType {
			case kmsg.ConfigResourceTypeTopic:
				ok = z.may(rTopic, res.ResourceName, kmsg.ACLOperationDescribeConfigs)
			case kmsg.ConfigResourceTypeBroker:
				ok = z.may(rCluster, clusterName, kmsg.ACLOperationDescribeConfigs)
			}
			if ok {
				kept = append(kept, res)
			} else {
				denied = append(denied, res)
			}
		}
		if denied == nil {
			return 0, nil
		}
		r.Resources = kept
		return 0, func() {
			rr := resp.(*kmsg.DescribeConfigsResponse)
			for _, res := range denied {
				rres := kmsg.NewDescribeConfigsResponseResource()
				rres.ResourceType, rres.ResourceName, rres.ErrorCode = res.ResourceType, res.ResourceName, clusterDenied
				if res.ResourceType == kmsg.ConfigResourceTypeTopic {
					rres.ErrorCode = topicDenied
				}
				rr.Resources = append(rr.Resources, rres)
			}
		}
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil || z.may(rCluster, clusterName, kmsg.ACLOperationIdempotentWrite) || z.b.acls.anyAllowed(z.principal, rTopic, opWrite) {
			return 0, nil
		}
		resp.(*kmsg.InitProducerIDResponse).ErrorCode = clusterDenied
		return clusterDenied, nil
	case *kmsg.FindCoordinatorRequest:
		return z.findCoordinator(r, resp.(*kmsg.FindCoordinatorResponse))
	case *kmsg.JoinGroupRequest:
		return z.group(r.Group, opRead, &resp.(*kmsg.JoinGroupResponse).ErrorCode), nil
	case *kmsg.SyncGroupRequest:
		return z.group(r.Group, opRead, &resp.(*kmsg.SyncGroupResponse).ErrorCode), nil
	case *kmsg.HeartbeatRequest:
		return z.group(r.Group, opRead, &resp.(*kmsg.HeartbeatResponse).ErrorCode), nil
	case *kmsg.LeaveGroupRequest:
		return z.group(r.Group, opRead, &resp.(*kmsg.LeaveGroupResponse).ErrorCode), nil
	case *kmsg.OffsetCommitRequest:
		return z.offsetCommit(r, resp.(*kmsg.OffsetCommitResponse))
	case *kmsg.OffsetFetchRequest:
		return z.offsetFetch(r, resp.(*kmsg.OffsetFetchResponse))
	case *kmsg.DescribeGroupsRequest:
		var kept, denied []string
		for _, g := range r.Groups {
			if z.may(rGroup, g, opDescribe) {
				kept = append(kept, g)
			} else {
				denied = append(denied, g)
			}
		}
		if denied == nil {
			return 0, nil
		}
		r.Groups = kept
		return 0, func() {
			rr := resp.(*kmsg.DescribeGroupsResponse)
			for _, g := range denied {
				rg := kmsg.NewDescribeGroupsResponseGroup()
				rg.Group, rg.ErrorCode = g, groupDenied
				rr.Groups = append(rr.Groups, rg)
			}
		}
	case *kmsg.ListGroupsRequest:
		if z.may(rCluster, clusterName, opDescribe) {
			return 0, nil
		}
		return 0, func() {
			rr := resp.(*kmsg.ListGroupsResponse)
			kept := rr.Groups[:0]
			for _, g := range rr.Groups {
				if z.may(rGroup, g.Group, opDescribe) {
					kept = append(kept, g)
				}
			}
			rr.Groups = kept
		}
	}
	// An API this file does not know: only super users.
	if z.may(rCluster, clusterName, kmsg.ACLOperationAll) {
		return 0, nil
	}
	return clusterDenied, nil
}

// group checks op on a group, setting *code on refusal.
func (z authz) group(g string, op kmsg.ACLOperation, code *int16) int16 {
	if z.may(rGroup, g, op) {
		return 0
	}
	*code = groupDenied
	return groupDenied
}

// metadata: topics named without Describe get TOPIC_AUTHORIZATION_FAILED;
// an unknown one is created only with Create on it or the cluster; a
// listing of all topics leaves out those without Describe.
func (z authz) metadata(r *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) func() {
	if r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0) {
		return func() {
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if t.Topic != nil && z.may(rTopic, *t.Topic, opDescribe) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
	}
	var kept []kmsg.MetadataRequestTopic
	var denied, unknown []string
	createCluster := z.may(rCluster, clusterName, opCreate)
	for _, t := range r.Topics {
		switch {
		case t.Topic == nil:
			kept = append(kept, t)
		case !z.may(rTopic, *t.Topic, opDescribe):
			denied = append(denied, *t.Topic)
		case z.b.catalog.lookup(*t.Topic) == nil && !createCluster && !z.may(rTopic, *t.Topic, opCreate):
			unknown = append(unknown, *t.Topic)
		default:
			kept = append(kept, t)
		}
	}
	if denied == nil && unknown == nil {
		return nil
	}
	r.Topics = kept
	if len(kept) == 0 {
		// An empty list asks for no topics (v1+); nil would ask for all.
		r.Topics = []kmsg.MetadataRequestTopic{}
	}
	return func() {
		for _, names := range []struct {
			list []string
			code int16
		}{{denied, topicDenied}, {unknown, kerr.UnknownTopicOrPartition.Code}} {
			for _, n := range names.list {
				st := kmsg.NewMetadataResponseTopic()
				st.Topic, st.ErrorCode = kmsg.StringPtr(n), names.code
				resp.Topics = append(resp.Topics, st)
			}
		}
	}
}

// findCoordinator: Describe on the group (transactional ids are refused
// by the handler anyway).
func (z authz) findCoordinator(r *kmsg.FindCoordinatorRequest, resp *kmsg.FindCoordinatorResponse) (int16, func()) {
	if r.CoordinatorType != 0 {
		return 0, nil
	}
	if r.Version < 4 {
		if z.may(rGroup, r.CoordinatorKey, opDescribe) {
			return 0, nil
		}
		resp.ErrorCode, resp.NodeID, resp.Port = groupDenied, -1, -1
		return groupDenied, nil
	}
	var kept, denied []string
	for _, k := range r.CoordinatorKeys {
		if z.may(rGroup, k, opDescribe) {
			kept = append(kept, k)
		} else {
			denied = append(denied, k)
		}
	}
	if denied == nil {
		return 0, nil
	}
	r.CoordinatorKeys = kept
	return 0, func() {
		for _, k := range denied {
			resp.Coordinators = append(resp.Coordinators, kmsg.FindCoordinatorResponseCoordinator{Key: k, NodeID: -1, Port: -1, ErrorCode: groupDenied})
		}
	}
}

// offsetCommit: Read on the group, Read on each topic.
func (z authz) offsetCommit(r *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) (int16, func()) {
	fill := func(topics []kmsg.OffsetCommitRequestTopic, code int16) {
		for _, t := range topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if !z.may(rGroup, r.Group, opRead) {
		fill(r.Topics, groupDenied)
		return groupDenied, nil
	}
	denied := split(z, &r.Topics, func(t *kmsg.OffsetCommitRequestTopic) string { return t.Topic }, opRead)
	if denied == nil {
		return 0, nil
	}
	return 0, func() { fill(denied, topicDenied) }
}

// offsetFetch: Describe on the group, Describe on each topic (a fetch of
// all topics leaves out those without it).
func (z authz) offsetFetch(r *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) (int16, func()) {
	if !z.may(rGroup, r.Group, opDescribe) {
		resp.ErrorCode = groupDenied
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Offset = p, groupDenied, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return groupDenied, nil
	}
	if r.Topics == nil {
		return 0, func() {
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if z.may(rTopic, t.Topic, opDescribe) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
	}
	denied := split(z, &r.Topics, func(t *kmsg.OffsetFetchRequestTopic) string { return t.Topic }, opDescribe)
	if denied == nil {
		return 0, nil
	}
	if r.Topics == nil {
		r.Topics = []kmsg.OffsetFetchRequestTopic{} // not "all topics"
	}
	return 0, func() {
		for _, t := range denied {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Offset = p, topicDenied, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

// withAdvertise makes Metadata and FindCoordinator name this broker by
// the address advertised on the connection's listener.
func (b *Broker) withAdvertise(cc *conn, finish func() kmsg.Response) func() kmsg.Response {
	sl := cc.listener
	if sl == nil || sl.cfg.Advertise == "" {
		return finish
	}
	return func() kmsg.Response {
		out := finish()
		switch rr := out.(type) {
		case *kmsg.MetadataResponse:
			for i := range rr.Brokers {
				if rr.Brokers[i].NodeID == b.nodeID {
					rr.Brokers[i].Host, rr.Brokers[i].Port = sl.host, sl.port
				}
			}
		case *kmsg.FindCoordinatorResponse:
			if rr.NodeID == b.nodeID {
				rr.Host, rr.Port = sl.host, sl.port
			}
			for i := range rr.Coordinators {
				if rr.Coordinators[i].NodeID == b.nodeID {
					rr.Coordinators[i].Host, rr.Coordinators[i].Port = sl.host, sl.port
				}
			}
		}
		return out
	}
}

// advertise is the address the listener advertises (nil: the broker's).
func (sl *SecureListener) advertise(b *Broker) string {
	if sl == nil || sl.cfg.Advertise == "" {
		return b.cfg.Advertise
	}
	return sl.cfg.Advertise
}

// protocol is the listener's security protocol (nil: PLAINTEXT).
func (sl *SecureListener) protocol() string {
	if sl == nil {
		return "PLAINTEXT"
	}
	return sl.cfg.Protocol()
}

// strOr is *s, or "" for nil.
func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
