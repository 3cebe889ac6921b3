package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTopicLimits: with MaxPartitionsPerTopic 4 and MaxPartitions 6,
// CreateTopics, CreatePartitions and auto-creation over them are refused
// with INVALID_PARTITIONS or POLICY_VIOLATION and a message naming the
// limit, and nothing is created.
func TestTopicLimits(t *testing.T) {
	b, addr := memBrokerWith(t, func(c *Config) {
		c.MaxPartitionsPerTopic = 4
		c.MaxPartitions = 6
	})
	cl := newClient(t, addr)
	ctx := context.Background()
	create := func(name string, n int32) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, -1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode, deref(resp.Topics[0].ErrorMessage)
	}
	grow := func(name string, n int32) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, n
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode, deref(resp.Topics[0].ErrorMessage)
	}
	check := func(what string, code int16, msg string, want *kerr.Error, limit string) {
		t.Helper()
		if code != want.Code || !strings.Contains(msg, limit) {
			t.Fatalf("%s: %s %q; want %s naming %s", what, errorFor(code), msg, want.Message, limit)
		}
	}
	code, msg := create("big", 5)
	check("CreateTopics with 5 partitions", code, msg, kerr.InvalidPartitions, "max_partitions_per_topic")
	if code, msg := create("a", 4); code != 0 {
		t.Fatalf("CreateTopics a with 4: %s %s", errorFor(code), msg)
	}
	code, msg = grow("a", 5)
	check("CreatePartitions a to 5", code, msg, kerr.InvalidPartitions, "max_partitions_per_topic")
	code, msg = create("b", 3)
	check("CreateTopics b with 3 (7 in all)", code, msg, kerr.PolicyViolation, "max_partitions")
	if code, msg := create("b", 1); code != 0 {
		t.Fatalf("CreateTopics b with 1: %s %s", errorFor(code), msg)
	}
	code, msg = grow("b", 3)
	check("CreatePartitions b to 3 (7 in all)", code, msg, kerr.PolicyViolation, "max_partitions")
	if code, msg := grow("b", 2); code != 0 {
		t.Fatalf("CreatePartitions b to 2 (6 in all): %s %s", errorFor(code), msg)
	}
	// Full: auto-creation fails too.
	auto := newClient(t, addr, kgo.AllowAutoTopicCreation())
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	name := "auto"
	mt.Topic = &name
	mreq.Topics = append(mreq.Topics, mt)
	mreq.AllowAutoTopicCreation = true
	if _, err := mreq.RequestWith(ctx, auto); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"big", "auto"} {
		if b.catalog.lookup(n) != nil {
			t.Fatalf("topic %s was created over the limits", n)
		}
	}
	if n := b.catalog.numPartitions(b.catalog.lookup("a")); n != 4 {
		t.Fatalf("topic a has %d partitions, want 4", n)
	}
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
