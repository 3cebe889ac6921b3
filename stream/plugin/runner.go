package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"
)

// outputGrace is how long a driver's stdout and stderr may stay open after
// the process exited (held by a child it left behind) before the host
// closes its ends of them.
const outputGrace = time.Second

// maxStdoutLine is the most bytes of one stdout line of a driver that is
// passed to go-plugin's handshake parser or logged; the rest is counted.
const maxStdoutLine = 4 << 10

// testHookHashed, when set, is called after a pinned binary's bytes were
// read and checked, before they run (tests swap the file here).
var testHookHashed func(binary string)

// procRunner runs a driver process for go-plugin (ClientConfig.RunnerFunc)
// in place of go-plugin's own runner, so that:
//   - a pinned binary runs from exactly the bytes whose SHA-256 was checked
//     (pinnedCopy), never from a second open of its path;
//   - the process gets a process group of its own, killed as a whole, so a
//     wrapper's children go with it;
//   - go-plugin reads the process's stdout and stderr through pipes that
//     are closed once the process has exited (at most outputGrace later),
//     so a child that keeps them open stalls neither the start timeout nor
//     Kill nor the exit;
//   - stdout after go-plugin's handshake line is logged line by line,
//     escaped by slog and cut at maxStdoutLine; the handshake line is passed
//     on with unprintable bytes escaped and cut at maxStdoutLine.
type procRunner struct {
	name   string // the binary as the caller named it
	cmd    *exec.Cmd
	pinned *pinnedFile // nil when not pinned

	stdoutR, stderrR *io.PipeReader
	stdoutW, stderrW *io.PipeWriter
	stdout           *stdoutLines

	done    chan struct{} // closed once the process was waited for
	waitErr error
}

var _ runner.Runner = (*procRunner)(nil)

// newProcRunner prepares the command for binary with args. spec is the
// command go-plugin built (its environment); extra are files the driver
// inherits from fd 3 on, with env naming them. A pinned binary (sum not
// nil) is read and checked here.
func newProcRunner(binary string, args []string, sum []byte, spec *exec.Cmd, env []string, extra []*os.File, logger *slog.Logger) (*procRunner, error) {
	r := &procRunner{name: binary, done: make(chan struct{})}
	path := binary
	if sum != nil {
		p, err := pinnedCopy(binary, sum)
		if err != nil {
			return nil, err
		}
		r.pinned = p
		if p.file != nil {
			path = "/proc/self/fd/" + strconv.Itoa(3+len(extra))
			extra = append(extra, p.file)
		} else {
			path = p.path
		}
		if testHookHashed != nil {
			testHookHashed(binary)
		}
	}
	cmd := exec.Command(path, args...)
	cmd.Args[0] = binary
	cmd.Env = append(append([]string(nil), spec.Env...), env...)
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = newProcAttr()
	cmd.WaitDelay = outputGrace
	r.stdoutR, r.stdoutW = io.Pipe()
	r.stderrR, r.stderrW = io.Pipe()
	r.stdout = &stdoutLines{w: r.stdoutW, logger: logger, binary: binary}
	cmd.Stdout = r.stdout
	cmd.Stderr = r.stderrW
	r.cmd = cmd
	return r, nil
}

// Start starts the process and the goroutine that waits for it.
func (r *procRunner) Start(context.Context) error {
	err := r.cmd.Start()
	if r.pinned != nil {
		r.pinned.closeFile() // the driver holds its own copy now
	}
	if err != nil {
		r.release()
		return fmt.Errorf("run %s: %w", r.name, err)
	}
	go func() {
		r.waitErr = r.cmd.Wait()
		killGroup(r.cmd.Process.Pid) // children it left behind
		r.stdout.finish()
		_ = r.stdoutW.Close()
		_ = r.stderrW.Close()
		r.release()
		close(r.done)
	}()
	return nil
}

// release drops the pinned copy.
func (r *procRunner) release() {
	if r.pinned != nil {
		r.pinned.remove()
	}
}

// Wait waits until the process has exited and its output pipes are closed.
func (r *procRunner) Wait(context.Context) error {
	<-r.done
	if errors.Is(r.waitErr, exec.ErrWaitDelay) {
		return nil // exited cleanly; a child held its output open
	}
	return r.waitErr
}

// Kill sends SIGKILL to the process's group.
func (r *procRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	default:
	}
	killGroup(r.cmd.Process.Pid)
	if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// exited is closed once the process has exited.
func (r *procRunner) exited() <-chan struct{} { return r.done }

func (r *procRunner) Stdout() io.ReadCloser { return r.stdoutR }
func (r *procRunner) Stderr() io.ReadCloser { return r.stderrR }
func (r *procRunner) Name() string          { return r.name }

// ID is the process id.
func (r *procRunner) ID() string {
	if r.cmd.Process == nil {
		return ""
	}
	return strconv.Itoa(r.cmd.Process.Pid)
}

// Diagnose is added to go-plugin's error when the handshake failed.
func (r *procRunner) Diagnose(context.Context) string {
	return "a Strata driver prints go-plugin's handshake line first on stdout (plugin.Serve does); check that " + r.name + " is one, built for this system"
}

func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// runnerFunc is the ClientConfig.RunnerFunc that starts binary; it keeps
// the runner in *out for the Client.
func runnerFunc(binary string, o *options, env []string, extra []*os.File, out **procRunner) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
		r, err := newProcRunner(binary, o.args, o.sha256, spec, env, extra, o.logger)
		if err != nil {
			return nil, err
		}
		*out = r
		return r, nil
	}
}

// stdoutLines splits a driver's stdout into lines: the first (go-plugin's
// handshake) goes on to go-plugin escaped and bounded, later ones are
// logged.
type stdoutLines struct {
	w      io.Writer
	logger *slog.Logger
	binary string

	mu      sync.Mutex
	line    []byte
	dropped int
	n       int // lines completed
}

func (s *stdoutLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range p {
		if c == '\n' {
			if err := s.flush(); err != nil {
				return 0, err
			}
			continue
		}
		if len(s.line) < maxStdoutLine {
			s.line = append(s.line, c)
		} else {
			s.dropped++
		}
	}
	return len(p), nil
}

// finish passes on or logs a last line without a newline.
func (s *stdoutLines) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.line) > 0 || s.dropped > 0 {
		_ = s.flush()
	}
}

// flush ends the current line.
func (s *stdoutLines) flush() error {
	line, dropped := s.line, s.dropped
	s.line, s.dropped = s.line[:0:0], 0
	s.n++
	if s.n == 1 {
		out := escapeUnprintable(line)
		if dropped > 0 {
			out = fmt.Appendf(out, "... (%d more bytes)", dropped)
		}
		_, err := s.w.Write(append(out, '\n'))
		return err
	}
	attrs := []any{"logger", "strata-plugin", "binary", s.binary, "line", string(line)}
	if dropped > 0 {
		attrs = append(attrs, "cut_bytes", dropped)
	}
	s.logger.Info("driver wrote to stdout", attrs...)
	return nil
}

// escapeUnprintable returns b with every byte outside printable ASCII as
// \xNN (and backslashes doubled).
func escapeUnprintable(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		switch {
		case c == '\\':
			out = append(out, '\\', '\\')
		case c >= 0x20 && c < 0x7f:
			out = append(out, c)
		default:
			out = fmt.Appendf(out, `\x%02x`, c)
		}
	}
	return out
}
