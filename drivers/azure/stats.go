package azure

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/stratastream/strata/stream/chunked"
)

// counters are the Storage's request counts. Every HTTP try is counted
// (the service bills each one), by kind: PUT, GET (downloads and
// properties-by-GET), HEAD (properties), LIST (GET ?comp=list) and DELETE.
type counters struct {
	puts, gets, heads, lists, deletes atomic.Int64
	bytesWritten, bytesRead           atomic.Int64
	calls, tries                      atomic.Int64
	errors                            atomic.Int64
}

func (c *counters) snapshot() chunked.RequestStats {
	return chunked.RequestStats{
		Puts:         c.puts.Load(),
		Gets:         c.gets.Load(),
		Heads:        c.heads.Load(),
		Lists:        c.lists.Load(),
		Deletes:      c.deletes.Load(),
		BytesWritten: c.bytesWritten.Load(),
		BytesRead:    c.bytesRead.Load(),
		Retries:      c.tries.Load() - c.calls.Load(),
		Errors:       c.errors.Load(),
	}
}

// callCounter is a per-call pipeline policy: it counts logical requests,
// so that Retries = tries - calls.
type callCounter struct{ c *counters }

// Do implements policy.Policy.
func (p callCounter) Do(req *policy.Request) (*http.Response, error) {
	p.c.calls.Add(1)
	return req.Next()
}

// tryCounter is a per-retry pipeline policy: it counts every HTTP try by
// kind, and the request bytes it sends. Bytes read are counted by Get once
// a body is fully read, so that an aborted download does not count.
type tryCounter struct{ c *counters }

// Do implements policy.Policy.
func (p tryCounter) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	p.c.tries.Add(1)
	switch raw.Method {
	case http.MethodPut:
		p.c.puts.Add(1)
		if raw.ContentLength > 0 {
			p.c.bytesWritten.Add(raw.ContentLength)
		}
	case http.MethodGet:
		if strings.Contains(raw.URL.RawQuery, "comp=list") {
			p.c.lists.Add(1)
		} else {
			p.c.gets.Add(1)
		}
	case http.MethodHead:
		p.c.heads.Add(1)
	case http.MethodDelete:
		p.c.deletes.Add(1)
	}
	return req.Next()
}
