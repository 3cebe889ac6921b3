package plugin

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// Driver logs travel as go-plugin expects them: one hclog JSON object per
// line on the driver's stderr ("@level", "@message", "@timestamp" and the
// attributes as further keys). go-plugin parses each line on the host and
// calls an hclog.Logger, which here is a bridge into the host's slog.Logger.

// slogLevelTrace is the slog level hclog's Trace maps to.
const slogLevelTrace = slog.LevelDebug - 4

// hclogTimeFormat is the "@timestamp" layout go-plugin parses.
const hclogTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// newDriverLogHandler returns the slog handler a driver process logs with:
// JSON lines in hclog's layout written to w (the process's real stderr).
func newDriverLogHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().Format(hclogTimeFormat))
			case slog.LevelKey:
				return slog.String("@level", hclogLevelName(a.Value.Any().(slog.Level)))
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	})
}

// hclogLevelName is the hclog name of a slog level.
func hclogLevelName(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "trace"
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

// slogLevel is the slog level of an hclog level.
func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slogLevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// hclogBridge is an hclog.Logger that writes to a slog.Logger: go-plugin's
// own messages and every log line of the driver process reach the host's
// slog this way.
type hclogBridge struct {
	l       *slog.Logger
	name    string
	implied []any
	// quiet: this is go-plugin's own logger (not a driver's), whose Info
	// lines ("starting plugin", "plugin process exited") are logged at
	// Debug; its warnings and errors keep their level.
	quiet bool
}

var _ hclog.Logger = (*hclogBridge)(nil)

func newHCLogBridge(l *slog.Logger, name string) *hclogBridge {
	return &hclogBridge{l: l, name: name, quiet: true}
}

func (h *hclogBridge) Log(level hclog.Level, msg string, args ...any) {
	lvl := slogLevel(level)
	if h.quiet && lvl == slog.LevelInfo {
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if !h.l.Enabled(ctx, lvl) {
		return
	}
	attrs := make([]any, 0, 2+len(h.implied)+len(args))
	if h.name != "" {
		attrs = append(attrs, "logger", h.name)
	}
	attrs = append(attrs, h.implied...)
	attrs = append(attrs, args...)
	h.l.Log(ctx, lvl, msg, attrs...)
}

func (h *hclogBridge) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogBridge) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogBridge) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogBridge) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogBridge) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogBridge) enabled(l hclog.Level) bool {
	return h.l.Enabled(context.Background(), slogLevel(l))
}

func (h *hclogBridge) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogBridge) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogBridge) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogBridge) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogBridge) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogBridge) ImpliedArgs() []any { return h.implied }

func (h *hclogBridge) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hclogBridge) Name() string { return h.name }

// Named returns a sub-logger; go-plugin logs a driver's lines through
// Named(binary name), so those keep their own levels.
func (h *hclogBridge) Named(name string) hclog.Logger {
	c := *h
	c.quiet = false
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (h *hclogBridge) ResetNamed(name string) hclog.Logger {
	c := *h
	c.quiet = false
	c.name = name
	return &c
}

// SetLevel is a no-op: the slog handler decides what is logged.
func (h *hclogBridge) SetLevel(hclog.Level) {}

// GetLevel reports the most verbose level the slog handler accepts.
func (h *hclogBridge) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (h *hclogBridge) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogBridge) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return bridgeWriter{h}
}

// bridgeWriter turns lines written by a standard logger into Info records.
type bridgeWriter struct{ h *hclogBridge }

func (w bridgeWriter) Write(p []byte) (int, error) {
	w.h.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
