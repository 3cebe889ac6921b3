package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUniqueFetchTopics: each partition of a Fetch is answered once, at
// its first listing, whether the ids are dense (the bitmap path), sparse,
// negative or split over two listings of one topic.
func TestUniqueFetchTopics(t *testing.T) {
	topic := func(name string, ps ...int32) kmsg.FetchRequestTopic {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = name
		for i, p := range ps {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset = p, int64(i)
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	show := func(ts []kmsg.FetchRequestTopic) string {
		s := ""
		for _, rt := range ts {
			s += rt.Topic + ":"
			for _, rp := range rt.Partitions {
				s += fmt.Sprintf(" %d@%d", rp.Partition, rp.FetchOffset)
			}
			s += ";"
		}
		return s
	}
	for _, tc := range []struct {
		in   []kmsg.FetchRequestTopic
		want string
	}{
		{[]kmsg.FetchRequestTopic{topic("a", 0, 1, 2, 63, 64)}, "a: 0@0 1@1 2@2 63@3 64@4;"},
		{[]kmsg.FetchRequestTopic{topic("a", 3, 1, 3, 0)}, "a: 3@0 1@1 0@3;"},
		{[]kmsg.FetchRequestTopic{topic("a", 64, 64)}, "a: 64@0;"},
		{[]kmsg.FetchRequestTopic{topic("a", 1<<30, 5, 1<<30)}, "a: 1073741824@0 5@1;"},
		{[]kmsg.FetchRequestTopic{topic("a", -1, 0, -1)}, "a: -1@0 0@1;"},
		{[]kmsg.FetchRequestTopic{topic("a", 0, 1), topic("b", 0), topic("a", 1, 2)}, "a: 0@0 1@1 2@1;b: 0@0;"},
		{[]kmsg.FetchRequestTopic{topic("a")}, "a:;"},
	} {
		if got := show(uniqueFetchTopics(tc.in)); got != tc.want {
			t.Errorf("%s: got %s, want %s", show(tc.in), got, tc.want)
		}
	}
}
