package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type versionRange struct{ min, max int16 }

// supported lists the APIs the broker serves and their versions. The
// maxima stop before versions that need topic ids in requests (Fetch v13,
// Produce v13), transactions (KIP-890) or KIP-848 groups.
var supported = map[int16]versionRange{
	kmsg.Produce.Int16():              {3, 11},
	kmsg.Fetch.Int16():                {4, 12},
	kmsg.ListOffsets.Int16():          {1, 8},
	kmsg.Metadata.Int16():             {0, 12},
	kmsg.OffsetCommit.Int16():         {0, 8},
	kmsg.OffsetFetch.Int16():          {0, 7},
	kmsg.FindCoordinator.Int16():      {0, 4},
	kmsg.JoinGroup.Int16():            {0, 9},
	kmsg.Heartbeat.Int16():            {0, 4},
	kmsg.LeaveGroup.Int16():           {0, 5},
	kmsg.SyncGroup.Int16():            {0, 5},
	kmsg.DescribeGroups.Int16():       {0, 5},
	kmsg.ListGroups.Int16():           {0, 4},
	kmsg.ApiVersions.Int16():          {0, 3},
	kmsg.CreateTopics.Int16():         {0, 7},
	kmsg.DeleteTopics.Int16():         {0, 5},
	kmsg.DeleteRecords.Int16():        {0, 2},
	kmsg.InitProducerID.Int16():       {0, 4},
	kmsg.OffsetForLeaderEpoch.Int16(): {0, 4},
	kmsg.DescribeConfigs.Int16():      {0, 4},
	kmsg.CreatePartitions.Int16():     {0, 3},
	kmsg.SASLHandshake.Int16():        {0, 1},
	kmsg.SASLAuthenticate.Int16():     {0, 2},
	kmsg.DescribeACLs.Int16():         {0, 3},
	kmsg.CreateACLs.Int16():           {0, 3},
	kmsg.DeleteACLs.Int16():           {0, 3},
}

// dispatch handles a decoded request that handle authorized. It runs in
// the connection's read loop, so work that must follow request order
// (starting appends) happens here; the returned function finishes the
// request on its own goroutine and returns the response (nil for none).
func (b *Broker) dispatch(cc *conn, p *pending, req kmsg.Request, resp kmsg.Response) func() kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		return b.produce(r, resp.(*kmsg.ProduceResponse))
	}
	return func() kmsg.Response {
		if b.notCoordinator(req, resp) {
			return resp
		}
		var code int16
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			return apiVersionsResponse(r.Version)
		case *kmsg.MetadataRequest:
			b.metadata(r, resp.(*kmsg.MetadataResponse))
		case *kmsg.FetchRequest:
			code = b.fetch(cc, r, resp.(*kmsg.FetchResponse), p)
		case *kmsg.ListOffsetsRequest:
			b.listOffsets(r, resp.(*kmsg.ListOffsetsResponse))
		case *kmsg.CreateTopicsRequest:
			code = b.createTopics(r, resp.(*kmsg.CreateTopicsResponse))
		case *kmsg.DeleteTopicsRequest:
			b.deleteTopics(r, resp.(*kmsg.DeleteTopicsResponse))
		case *kmsg.CreatePartitionsRequest:
			b.createPartitions(r, resp.(*kmsg.CreatePartitionsResponse))
		case *kmsg.DeleteRecordsRequest:
			b.deleteRecords(r, resp.(*kmsg.DeleteRecordsResponse))
		case *kmsg.OffsetForLeaderEpochRequest:
			b.offsetForLeaderEpoch(r, resp.(*kmsg.OffsetForLeaderEpochResponse))
		case *kmsg.DescribeConfigsRequest:
			b.describeConfigs(r, resp.(*kmsg.DescribeConfigsResponse))
		case *kmsg.InitProducerIDRequest:
			code = b.initProducerID(r, resp.(*kmsg.InitProducerIDResponse))
		case *kmsg.FindCoordinatorRequest:
			code = b.findCoordinator(r, resp.(*kmsg.FindCoordinatorResponse))
		case *kmsg.JoinGroupRequest:
			code = b.groups.join(cc, r, resp.(*kmsg.JoinGroupResponse))
		case *kmsg.SyncGroupRequest:
			code = b.groups.sync(r, resp.(*kmsg.SyncGroupResponse))
		case *kmsg.HeartbeatRequest:
			code = b.groups.heartbeat(r, resp.(*kmsg.HeartbeatResponse))
		case *kmsg.LeaveGroupRequest:
			code = b.groups.leave(r, resp.(*kmsg.LeaveGroupResponse))
		case *kmsg.OffsetCommitRequest:
			code = b.groups.offsetCommit(r, resp.(*kmsg.OffsetCommitResponse))
		case *kmsg.OffsetFetchRequest:
			code = b.groups.offsetFetch(r, resp.(*kmsg.OffsetFetchResponse))
		case *kmsg.ListGroupsRequest:
			code = b.groups.listGroups(r, resp.(*kmsg.ListGroupsResponse))
		case *kmsg.DescribeGroupsRequest:
			b.groups.describeGroups(r, resp.(*kmsg.DescribeGroupsResponse))
		}
		b.metrics.request(req.Key(), code)
		return resp
	}
}

// apiVersionsResponse lists the supported APIs at version v.
func apiVersionsResponse(v int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(v)
	keys := make([]int16, 0, len(supported))
	for k := range supported {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		vr := supported[k]
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: vr.min, MaxVersion: vr.max})
	}
	return resp
}

// errString returns msg as a nullable string (nil for "").
func errString(msg string) *string {
	if msg == "" {
		return nil
	}
	return &msg
}

// errorFor is the kerr error of code, for messages.
func errorFor(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return ""
}
