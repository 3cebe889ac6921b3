package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/sharedlog/sharedlogtest"
)

// TestServeForeignChunkNotServed: with strata serve stopped (SIGTERM, or
// SIGKILL as a crash), the chunk file holding topic sy's record is copied
// over topic sx's chunk of the same slot name (as an operator's slip or a
// restore into the wrong directory would). After the restart sy's record
// is never served as sx's, and sy is served as before (fetched, produced
// to). After the clean stop (the slot is in a checkpoint) a Fetch of sx
// gets KAFKA_STORAGE_ERROR. After the crash the open walks the slot and
// fails on the foreign chunk: the broker still starts, answers Produce and
// Fetch of sx with KAFKA_STORAGE_ERROR, logs the failure once naming the
// topic, partition and chunk, stays ready and reports the partition in
// /readyz and strata_broker_partitions_failed. Without the chunk checksums
// bound to their stream and incarnation, the fetch after the crash
// returned sy's record; with them but without failed partitions kept, the
// broker refused to start.
func TestServeForeignChunkNotServed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds strata and runs serve four times")
	}
	bin := buildBinary(t, t.TempDir(), "strata", ".")
	for _, stop := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(stop.String(), func(t *testing.T) { foreignChunkCase(t, bin, stop) })
	}
}

func foreignChunkCase(t *testing.T, bin string, stop syscall.Signal) {
	dir := t.TempDir()
	root := filepath.Join(dir, "nfs")
	cfgPath := filepath.Join(dir, "serve.yaml")
	// Plain streams (no stream sets), so each record lands in a chunk file
	// of its partition's data stream.
	cfg := fmt.Sprintf("cluster: foreign-test\ndrivers:\n  - name: disk\n    driver: nfs\n    stream_sets: {enabled: false}\n    config:\n      root: %s\n      create_root: true\n", root)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	values := map[string][]byte{"sx": []byte("record-of-topic-sx"), "sy": []byte("record-of-topic-sy")}
	ctx := context.Background()
	// serve starts strata serve and runs work with a client of it and its
	// --http address; it returns the process, or nil and serve's stderr if
	// it did not start.
	serve := func(work func(cl *kgo.Client, p *serveProc, httpAddr string)) (*serveProc, string) {
		t.Helper()
		var addr, httpAddr string
		var p *serveProc
		err := errPortTaken
		for try := 0; errors.Is(err, errPortTaken) && try < 3; try++ {
			addr, httpAddr = freePort(t), freePort(t)
			p, err = tryStartServeCmd(t, exec.Command(bin, "serve", "--config", cfgPath, "--listen", addr, "--http", httpAddr))
		}
		if err != nil {
			return nil, err.Error()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		work(cl, p, httpAddr)
		return p, ""
	}
	p, failed := serve(func(cl *kgo.Client, _ *serveProc, _ string) {
		for _, topic := range []string{"sx", "sy"} {
			createTopic(ctx, t, cl, topic, 1)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: values[topic]}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", topic, err)
			}
		}
	})
	if p == nil {
		t.Fatal(failed)
	}
	if err := p.cmd.Process.Signal(stop); err != nil {
		t.Fatal(err)
	}
	_ = p.wait()

	// The chunk files holding each record, by path.
	holding := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(path)) != "c@" { // chunk slots (drivers/nfs: a directory element ends in @)
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for topic, v := range values {
			if bytes.Contains(b, v) {
				if holding[topic] != "" {
					t.Fatalf("%s's record in two chunk files: %s and %s", topic, holding[topic], path)
				}
				holding[topic] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sx, sy := holding["sx"], holding["sy"]
	if sx == "" || sy == "" || filepath.Base(sx) != filepath.Base(sy) {
		t.Fatalf("want one chunk file of the same slot name per topic holding its record, found %v", holding)
	}
	b, err := os.ReadFile(sy)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sx, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("copied %s over %s", sy, sx)

	// After a clean stop the chunk is first read by the Fetch; after a
	// crash the open walks the slot and finds the foreign chunk, and the
	// broker serves without sx-0.
	crash := stop == syscall.SIGKILL
	p, failed = serve(func(cl *kgo.Client, p *serveProc, httpAddr string) {
		code, recs := fetchPartition0(ctx, t, cl, "sx")
		for _, v := range recs {
			if bytes.Equal(v, values["sy"]) {
				t.Fatalf("a fetch of sx returned sy's record %q (error %d)", v, code)
			}
		}
		if code != kerr.KafkaStorageError.Code {
			t.Fatalf("fetch of sx: error %d, records %q; want KAFKA_STORAGE_ERROR", code, recs)
		}
		if code := producePartition0(ctx, t, cl, "sx"); crash && code != kerr.KafkaStorageError.Code {
			t.Fatalf("produce to sx, whose partition failed to open: error %d; want KAFKA_STORAGE_ERROR", code)
		}
		more := []byte("second-record-of-topic-sy")
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sy", Value: more}).FirstErr(); err != nil {
			t.Fatalf("produce to sy after the copy: %v\n%s", err, p.stderr.String())
		}
		code, recs = fetchPartition0(ctx, t, cl, "sy")
		if code != 0 || len(recs) != 2 || !bytes.Equal(recs[0], values["sy"]) || !bytes.Equal(recs[1], more) {
			t.Fatalf("fetch of sy: error %d, records %q; want its own two records", code, recs)
		}
		if !crash {
			return
		}
		logs := p.stderr.String()
		if n := strings.Count(logs, `msg="partition failed to open`); n != 1 ||
			!strings.Contains(logs, "topic=sx partition=0") || !strings.Contains(logs, "another stream's or incarnation's chunk") {
			t.Fatalf("want the failed open of sx-0 logged once, naming the foreign chunk; logged %d times:\n%s", n, logs)
		}
		status, body := httpGet(t, "http://"+httpAddr+"/readyz")
		if status != 200 || !strings.Contains(body, "1 partition failed to open") || !strings.Contains(body, "sx-0") {
			t.Fatalf("/readyz: %d %q; want 200 naming sx-0 as failed", status, body)
		}
		if _, metrics := httpGet(t, "http://"+httpAddr+"/metrics"); !strings.Contains(metrics, "\nstrata_broker_partitions_failed 1\n") ||
			!strings.Contains(metrics, "\nstrata_broker_ready 1\n") {
			t.Fatalf("/metrics: want strata_broker_partitions_failed 1 and strata_broker_ready 1:\n%s", metrics)
		}
		t.Logf("served with sx-0 failed; /readyz: %q; log: %.900s", body, logs[strings.Index(logs, "partition failed to open"):])
	})
	if p == nil {
		t.Fatalf("serve after the copy did not start:\n%s", failed)
	}
}

// producePartition0 sends one Produce of a record to partition 0 of topic
// and returns the partition's error code.
func producePartition0(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) int16 {
	t.Helper()
	req := sharedlogtest.ProduceRequest(topic, 0, sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1, Timestamp: time.Now().UnixMilli(), Tag: "produce-" + topic}))
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Produce to %s: %v (%+v)", topic, err, resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// httpGet returns the status and body of a GET of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// fetchPartition0 fetches partition 0 of topic from offset 0 with one Fetch
// sent to the broker, and returns the partition's error code and the
// values of its records.
func fetchPartition0(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) (int16, [][]byte) {
	t.Helper()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 || len(mresp.Brokers) != 1 {
		t.Fatalf("Metadata of %s: %v (%+v)", topic, err, mresp)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.MinBytes = -1, 1<<20, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, mresp.Topics[0].TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := cl.Broker(int(mresp.Brokers[0].NodeID)).Request(rctx, req)
	if err != nil {
		t.Fatalf("Fetch of %s: %v", topic, err)
	}
	resp := r.(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch of %s: %+v", topic, resp)
	}
	p := resp.Topics[0].Partitions[0]
	var values [][]byte
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: 0}, &p, kgo.DefaultDecompressor(), nil)
	for _, rec := range fp.Records {
		values = append(values, rec.Value)
	}
	return p.ErrorCode, values
}

// createTopic creates a topic with n partitions through cl.
func createTopic(ctx context.Context, t testing.TB, cl *kgo.Client, topic string, n int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, n, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("CreateTopics %s: error %d: %s", topic, c, deref(resp.Topics[0].ErrorMessage))
	}
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
