package bench

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClientFigures are the bench client's own Kafka requests over the counted
// runs of produce-consume: how many Produce and Fetch requests it made and
// how large they were. A consumer that falls behind fetches in fewer,
// larger responses, which changes what the shared client has left for
// producing (docs/streamsets.md, "Current figures").
type ClientFigures struct {
	ProducePerSec float64 `json:"produce_requests_per_s"`
	// ProduceBytes is the mean size of a Produce request as written.
	ProduceBytes float64 `json:"produce_request_bytes"`
	FetchPerSec  float64 `json:"fetch_requests_per_s"`
	// FetchBytes is the mean size of a Fetch response as read.
	FetchBytes float64 `json:"fetch_response_bytes"`
}

// clientCounter is a kgo hook counting the Produce requests written and
// the Fetch responses read, with their bytes.
type clientCounter struct {
	produce, produceBytes, fetch, fetchBytes atomic.Int64
}

// clientCounts is a snapshot of a clientCounter.
type clientCounts struct{ produce, produceBytes, fetch, fetchBytes int64 }

var (
	_ kgo.HookBrokerWrite = (*clientCounter)(nil)
	_ kgo.HookBrokerRead  = (*clientCounter)(nil)
)

// OnBrokerWrite counts a Produce request written.
func (c *clientCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if err == nil && key == kmsg.Produce.Int16() {
		c.produce.Add(1)
		c.produceBytes.Add(int64(n))
	}
}

// OnBrokerRead counts a Fetch response read.
func (c *clientCounter) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if err == nil && key == kmsg.Fetch.Int16() {
		c.fetch.Add(1)
		c.fetchBytes.Add(int64(n))
	}
}

func (c *clientCounter) snapshot() clientCounts {
	return clientCounts{c.produce.Load(), c.produceBytes.Load(), c.fetch.Load(), c.fetchBytes.Load()}
}

// figures are the rates and mean sizes between snapshots a and b, secs
// apart.
func (b clientCounts) since(a clientCounts, secs float64) *ClientFigures {
	f := &ClientFigures{}
	if secs > 0 {
		f.ProducePerSec = float64(b.produce-a.produce) / secs
		f.FetchPerSec = float64(b.fetch-a.fetch) / secs
	}
	if n := b.produce - a.produce; n > 0 {
		f.ProduceBytes = float64(b.produceBytes-a.produceBytes) / float64(n)
	}
	if n := b.fetch - a.fetch; n > 0 {
		f.FetchBytes = float64(b.fetchBytes-a.fetchBytes) / float64(n)
	}
	return f
}

// medianClient is the median of each figure of cs, nil for none.
func medianClient(cs []*ClientFigures) *ClientFigures {
	if len(cs) == 0 {
		return nil
	}
	return &ClientFigures{
		ProducePerSec: medianBy(cs, func(c *ClientFigures) float64 { return c.ProducePerSec }),
		ProduceBytes:  medianBy(cs, func(c *ClientFigures) float64 { return c.ProduceBytes }),
		FetchPerSec:   medianBy(cs, func(c *ClientFigures) float64 { return c.FetchPerSec }),
		FetchBytes:    medianBy(cs, func(c *ClientFigures) float64 { return c.FetchBytes }),
	}
}
