package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestDriverLogHandlerFormat: driver log lines carry the keys and the
// timestamp layout go-plugin parses (anything else would reach the host as
// one unstructured Debug line).
func TestDriverLogHandlerFormat(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(newDriverLogHandler(&buf, slog.LevelDebug))
	l.Warn("disk slow", "ms", 12, slog.Group("g", "k", "v"))
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON object: %q", buf.String())
	}
	if m["@level"] != "warn" || m["@message"] != "disk slow" || m["ms"] != float64(12) {
		t.Fatalf("line %v", m)
	}
	ts, _ := m["@timestamp"].(string)
	if _, err := time.Parse(hclogTimeFormat, ts); err != nil {
		t.Fatalf("@timestamp %q: %v", ts, err)
	}
	if g, _ := m["g"].(map[string]any); g["k"] != "v" {
		t.Fatalf("group lost: %v", m["g"])
	}
}

// TestHCLogBridgeLevels: hclog levels map onto slog's; go-plugin's own Info
// lines are demoted to Debug, a driver's (Named) lines are not.
func TestHCLogBridgeLevels(t *testing.T) {
	h := &recordHandler{}
	root := newHCLogBridge(slog.New(h), "strata-plugin")
	root.Info("starting plugin")
	root.Error("plugin process exited", "error", "signal: killed")
	drv := root.Named("strata-driver-x")
	drv.Info("driver says hi", "k", 1)
	drv.Trace("very verbose")
	want := []struct {
		msg   string
		level slog.Level
	}{
		{"starting plugin", slog.LevelDebug},
		{"plugin process exited", slog.LevelError},
		{"driver says hi", slog.LevelInfo},
		{"very verbose", slogLevelTrace},
	}
	if len(h.records) != len(want) {
		t.Fatalf("%d records, want %d", len(h.records), len(want))
	}
	for i, w := range want {
		if h.records[i].Message != w.msg || h.records[i].Level != w.level {
			t.Errorf("record %d: %q at %v, want %q at %v", i, h.records[i].Message, h.records[i].Level, w.msg, w.level)
		}
	}
	if drv.GetLevel() != hclog.Trace || !drv.IsTrace() {
		t.Errorf("GetLevel %v with a handler that accepts everything", drv.GetLevel())
	}
}

// recordHandler keeps the records it handles.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordHandler) find(msg string) (slog.Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Message == msg {
			return r, true
		}
	}
	return slog.Record{}, false
}
