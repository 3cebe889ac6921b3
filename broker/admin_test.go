package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAcks produces with acks=0, acks=1 and acks=all (non-idempotent for
// 0 and 1, as Kafka requires) and reads every record back.
func TestAcks(t *testing.T) {
	st := nfsStore(t, "")
	_, addr := startBroker(t, st, nil)
	admin := newClient(t, addr)
	for _, tc := range []struct {
		name string
		acks kgo.Acks
	}{{"acks0", kgo.NoAck()}, {"acks1", kgo.LeaderAck()}, {"acksall", kgo.AllISRAcks()}} {
		t.Run(tc.name, func(t *testing.T) {
			createTopic(t, admin, tc.name, 2, nil)
			opts := []kgo.Opt{kgo.RequiredAcks(tc.acks)}
			if tc.name != "acksall" {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			cl := newClient(t, addr, opts...)
			acked := produceN(t, cl, tc.name, 300, 20)
			if tc.name == "acks0" {
				// acks=0 reports no offsets: compare the values only.
				got := consumeAll(t, addr, tc.name, 300)
				seen := map[string]bool{}
				for _, r := range got {
					seen[string(r.val)] = true
				}
				for _, r := range acked {
					if !seen[string(r.val)] {
						t.Fatalf("acks=0 record %q not consumed", r.val[:9])
					}
				}
				return
			}
			checkConsumed(t, acked, consumeAll(t, addr, tc.name, 300))
		})
	}
}

// TestAdminAPIs covers ListOffsets (earliest, latest, by time),
// DeleteRecords, CreatePartitions, DescribeConfigs, OffsetForLeaderEpoch,
// DeleteTopics, ListGroups and DescribeGroups.
func TestAdminAPIs(t *testing.T) {
	st := nfsStore(t, "")
	b, addr := startBroker(t, st, nil)
	cl := newClient(t, addr)
	ctx := context.Background()
	var listOffsetWith func(*kgo.Client, int64) (int64, int32)
	createTopic(t, cl, "adm", 1, map[string]string{"retention.bytes": "1048576"})

	// Bad creates.
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, bad := range []struct {
		name string
		cfg  string
	}{{"adm", ""}, {"bad/name", ""}, {"cfg", "cleanup.policy"}} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = bad.name, 1, -1
		if bad.cfg != "" {
			v := "compact"
			rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: bad.cfg, Value: &v}}
		}
		req.Topics = append(req.Topics, rt)
	}
	cr, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int16{kerr.TopicAlreadyExists.Code, kerr.InvalidTopicException.Code, kerr.InvalidConfig.Code} {
		if cr.Topics[i].ErrorCode != want {
			t.Fatalf("CreateTopics %s: %s, want %s", cr.Topics[i].Topic, errorFor(cr.Topics[i].ErrorCode), errorFor(want))
		}
	}

	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Topic: "adm", Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	listOffset := func(ts int64) (int64, int32) {
		return listOffsetWith(cl, ts)
	}
	listOffsetWith = func(cl *kgo.Client, ts int64) (int64, int32) {
		t.Helper()
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "adm"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
		resp, err := lo.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("ListOffsets %d: %v %+v", ts, err, resp)
		}
		p := resp.Topics[0].Partitions[0]
		return p.Offset, p.LeaderEpoch
	}
	if o, _ := listOffset(-2); o != 0 {
		t.Fatalf("earliest %d", o)
	}
	if o, e := listOffset(-1); o != 10 || e != b.Epoch() {
		t.Fatalf("latest %d epoch %d", o, e)
	}
	if o, _ := listOffset(base.Add(4*time.Minute + time.Second).UnixMilli()); o != 5 {
		t.Fatalf("by timestamp: %d, want 5", o)
	}

	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "adm"
	drt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 3}}
	dr.Topics = append(dr.Topics, drt)
	drr, err := dr.RequestWith(ctx, cl)
	if err != nil || drr.Topics[0].Partitions[0].ErrorCode != 0 || drr.Topics[0].Partitions[0].LowWatermark != 3 {
		t.Fatalf("DeleteRecords: %v %+v", err, drr)
	}
	if o, _ := listOffset(-2); o != 3 {
		t.Fatalf("earliest after DeleteRecords %d, want 3", o)
	}

	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.ReplicaID = -1
	oet := kmsg.NewOffsetForLeaderEpochRequestTopic()
	oet.Topic = "adm"
	oet.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: b.Epoch(), LeaderEpoch: b.Epoch()}}
	oe.Topics = append(oe.Topics, oet)
	oer, err := oe.RequestWith(ctx, cl)
	if err != nil || oer.Topics[0].Partitions[0].ErrorCode != 0 || oer.Topics[0].Partitions[0].EndOffset != 10 {
		t.Fatalf("OffsetForLeaderEpoch: %v %+v", err, oer)
	}
	oe.Topics[0].Partitions[0].CurrentLeaderEpoch = b.Epoch() - 1
	if oer, err = oe.RequestWith(ctx, cl); err != nil || oer.Topics[0].Partitions[0].ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("OffsetForLeaderEpoch with an old epoch: %v %+v", err, oer)
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 30000
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "adm", Count: 3}}
	cpr, err := cp.RequestWith(ctx, cl)
	if err != nil || cpr.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions: %v %+v", err, cpr)
	}
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	name := "adm"
	mt.Topic = &name
	md.Topics = append(md.Topics, mt)
	mdr, err := md.RequestWith(ctx, cl)
	if err != nil || len(mdr.Topics) != 1 || len(mdr.Topics[0].Partitions) != 3 {
		t.Fatalf("Metadata after CreatePartitions: %v %+v", err, mdr)
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "adm"
	dc.Resources = append(dc.Resources, res)
	dcr, err := dc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range dcr.Resources[0].Configs {
		if c.Name == "retention.bytes" {
			found = *c.Value == "1048576" && !c.IsDefault
		}
	}
	if !found {
		t.Fatalf("DescribeConfigs lacks retention.bytes=1048576: %+v", dcr.Resources[0].Configs)
	}

	// A simple (no member) commit makes a group ListGroups and
	// DescribeGroups report.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "simple", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "adm", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}}}
	ocr, err := oc.RequestWith(ctx, cl)
	if err != nil || ocr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetCommit: %v %+v", err, ocr)
	}
	lg, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl)
	if err != nil || len(lg.Groups) != 1 || lg.Groups[0].Group != "simple" {
		t.Fatalf("ListGroups: %v %+v", err, lg)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"simple", "nope"}
	dgr, err := dg.RequestWith(ctx, cl)
	if err != nil || dgr.Groups[0].State != "Empty" || dgr.Groups[1].State != "Dead" {
		t.Fatalf("DescribeGroups: %v %+v", err, dgr)
	}

	deleteTopic(t, cl, "adm")
	if sum := committedSum(t, cl, "simple"); sum != 0 {
		t.Fatalf("committed offsets of a deleted topic remain: %d", sum)
	}
	mdr, err = md.RequestWith(ctx, cl)
	if err != nil || mdr.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("Metadata after DeleteTopics: %v %+v", err, mdr)
	}
	// Recreating the name starts empty (a new client: kgo caches metadata).
	createTopic(t, cl, "adm", 1, nil)
	if o, _ := listOffsetWith(newClient(t, addr), -1); o != 0 {
		t.Fatalf("recreated topic has latest offset %d", o)
	}
}

// TestOffsetsCompaction commits more than compactAfter times: the offsets
// stream is rewritten as a snapshot and trimmed, and a broker that takes
// over reads the same offsets.
func TestOffsetsCompaction(t *testing.T) {
	dir := t.TempDir()
	b, addr := startBroker(t, nfsStore(t, dir), nil)
	cl := newClient(t, addr)
	ctx := context.Background()
	createTopic(t, cl, "cmp", 4, nil)
	for i := 0; i < compactAfter+50; i++ {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation = []string{"ga", "gb"}[i%2], -1
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "cmp", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: int32(i % 4), Offset: int64(i), LeaderEpoch: -1}}}}
		if r, err := oc.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if start := b.offsets.s.StartOffset(); start < compactAfter {
		t.Fatalf("offsets stream starts at %d after %d commits: not compacted", start, compactAfter+50)
	}
	wantA, wantB := committedSum(t, cl, "ga"), committedSum(t, cl, "gb")
	_, addr2 := startBroker(t, nfsStore(t, dir), nil)
	cl2 := newClient(t, addr2)
	if a, bb := committedSum(t, cl2, "ga"), committedSum(t, cl2, "gb"); a != wantA || bb != wantB {
		t.Fatalf("after takeover: ga %d gb %d, want %d %d", a, bb, wantA, wantB)
	}
}

// TestFetchLongPollAndLimits: a Fetch waiting on an empty partition is
// answered with the record produced meanwhile (before MaxWait); KIP-74: a
// response limit below one batch still returns the first batch, and only
// that one.
func TestFetchLongPollAndLimits(t *testing.T) {
	st := nfsStore(t, "")
	_, addr := startBroker(t, st, nil)
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	createTopic(t, cl, "lp", 2, nil)
	fetch := func(maxWait, minBytes, maxBytes, partMax int32, offsets ...int64) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, minBytes, maxBytes
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "lp"
		for p, off := range offsets {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), off, partMax
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	done := make(chan *kmsg.FetchResponse, 1)
	go func() { done <- fetch(60000, 1, 1<<20, 1<<20, 0, 0) }()
	time.Sleep(300 * time.Millisecond)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lp", Partition: 1, Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp := <-done
	if n := len(resp.Topics[0].Partitions[1].RecordBatches); n == 0 {
		t.Fatalf("long-poll returned without the record produced while it waited: %+v", resp)
	}

	// A long poll on partition 0 alone, woken by appends to partition 1,
	// goes on waiting, and answers the append to partition 0.
	only0 := make(chan *kmsg.FetchResponse, 1)
	go func() { only0 <- fetch(60000, 1, 1<<20, 1<<20, 0) }()
	time.Sleep(300 * time.Millisecond)
	for range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lp", Partition: 1, Value: []byte("elsewhere")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case resp := <-only0:
		t.Fatalf("a long poll on partition 0 returned after appends to partition 1 only: %+v", resp)
	case <-time.After(300 * time.Millisecond):
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lp", Partition: 0, Value: []byte("here")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if resp := <-only0; len(resp.Topics[0].Partitions) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("long poll on partition 0: want its record, got %+v", resp)
	}

	// Two batches in partition 0, one in partition 1.
	for i := 0; i < 2; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lp", Partition: 0, Value: make([]byte, 500)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	resp = fetch(0, 1, 1, 1, 0, 0)
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(p0.RecordBatches); err != nil || int(rb.Length)+12 != len(p0.RecordBatches) {
		t.Fatalf("KIP-74: want exactly the first batch of partition 0, got %d bytes (%v)", len(p0.RecordBatches), err)
	}
	if len(p1.RecordBatches) != 0 || p1.HighWatermark != 4 || p0.HighWatermark != 3 {
		t.Fatalf("KIP-74: partition 1 got %d bytes past the response limit; high watermarks %d %d", len(p1.RecordBatches), p0.HighWatermark, p1.HighWatermark)
	}
}

// TestCreateTopicsConfigs: a CreateTopics v5+ answer carries each created
// topic's effective configs (set and default), never a null list, which the
// Java Admin client dereferences (TestJavaAdmin runs the client itself).
func TestCreateTopicsConfigs(t *testing.T) {
	_, addr := startBroker(t, nfsStore(t, ""), nil)
	cl := newClient(t, addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "cfgs", 1, -1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
	rt.Configs = append(rt.Configs, c)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range resp.Topics[0].Configs {
		got[c.Name] = fmt.Sprintf("%s/%d", *c.Value, c.Source)
	}
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Configs == nil ||
		got["retention.ms"] != "3600000/1" || got["cleanup.policy"] != "delete/5" {
		t.Fatalf("CreateTopics v7: error %d, configs %v (nil: %v); want retention.ms=3600000 (topic, 1) and cleanup.policy=delete (default, 5)",
			resp.Topics[0].ErrorCode, got, resp.Topics[0].Configs == nil)
	}
}

// TestOffsetCommitRacingRelease: an offset commit admitted as the group
// offsets move to another broker (release closes their stream) fails
// NOT_COORDINATOR-style, never on a stream that is gone. It read the
// stream before waiting for the release and crashed the broker on a nil
// stream (found by killing and pausing brokers of a cluster under a
// consumer group).
func TestOffsetCommitRacingRelease(t *testing.T) {
	b, _ := startBroker(t, nfsStore(t, t.TempDir()), nil)
	o := b.offsets
	ctx := context.Background()
	o.commitMu.Lock() // a release under way
	done := make(chan error, 1)
	go func() {
		done <- o.commit(ctx, []committed{{Group: "g", Topic: "t", Partition: 0, Offset: 1}})
	}()
	time.Sleep(50 * time.Millisecond) // the commit waits for commitMu
	_ = o.s.Close()
	o.s = nil
	o.commitMu.Unlock()
	if err := <-done; !errors.Is(err, errNotCoordinator) {
		t.Fatalf("commit racing a release: %v; want errNotCoordinator", err)
	}
	if err := o.close(); err != nil {
		t.Fatal(err)
	}
}
