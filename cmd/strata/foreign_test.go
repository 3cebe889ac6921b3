package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
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
)

// TestServeForeignChunkNotServed: with strata serve stopped (SIGTERM, or
// SIGKILL as a crash), the chunk file holding topic sy's record is copied
// over topic sx's chunk of the same slot name (as an operator's slip or a
// restore into the wrong directory would). After the restart sy's record
// is never served as sx's: after the crash (the open walks the slot) the
// broker refuses to start, naming the foreign chunk; after the clean stop
// (the slot is in a checkpoint) a Fetch of sx gets KAFKA_STORAGE_ERROR.
// sy is still served. Without the chunk checksums bound to their stream
// and incarnation, the fetch after the crash returned sy's record.
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
	// serve starts strata serve and runs work with a client of it; it
	// returns the process, or nil and serve's stderr if it did not start.
	serve := func(work func(cl *kgo.Client)) (*serveProc, string) {
		t.Helper()
		var addr string
		var p *serveProc
		err := errPortTaken
		for try := 0; errors.Is(err, errPortTaken) && try < 3; try++ {
			addr = freePort(t)
			p, err = tryStartServeCmd(t, exec.Command(bin, "serve", "--config", cfgPath, "--listen", addr))
		}
		if err != nil {
			return nil, err.Error()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		work(cl)
		return p, ""
	}
	p, failed := serve(func(cl *kgo.Client) {
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

	// After a crash the open walks the slot and finds the foreign chunk:
	// the broker refuses to start, naming it (the partition cannot be
	// opened). After a clean stop the chunk is first read by the Fetch.
	if _, failed := serve(func(cl *kgo.Client) {
		for _, topic := range []string{"sx", "sy"} {
			code, recs := fetchPartition0(ctx, t, cl, topic)
			for _, v := range recs {
				if topic == "sx" && bytes.Equal(v, values["sy"]) {
					t.Fatalf("a fetch of sx returned sy's record %q (error %d)", v, code)
				}
			}
			switch {
			case topic == "sx" && code != kerr.KafkaStorageError.Code:
				t.Fatalf("fetch of sx: error %d, records %q; want KAFKA_STORAGE_ERROR", code, recs)
			case topic == "sy" && (code != 0 || len(recs) != 1 || !bytes.Equal(recs[0], values["sy"])):
				t.Fatalf("fetch of sy: error %d, records %q; want its own record", code, recs)
			}
		}
	}); failed != "" {
		if !strings.Contains(failed, "corrupt data") || !strings.Contains(failed, "another stream's or incarnation's chunk") {
			t.Fatalf("serve after the copy did not start, and not for the foreign chunk:\n%s", failed)
		}
		t.Logf("serve after the copy refused to start: %.300s", failed[strings.Index(failed, "startup failed"):])
	}
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
