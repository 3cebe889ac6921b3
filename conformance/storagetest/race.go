package storagetest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// racerEnv holds a racer child's id; its presence makes Run a racer.
const racerEnv = "STRATA_STORAGETEST_RACER"

// linePrefix marks the protocol lines a racer writes to its stdout, apart
// from whatever else the test binary prints.
const linePrefix = "storagetest: "

// raceWait bounds each wait for a racer's answer.
const raceWait = 2 * time.Minute

func isRacer() bool { return os.Getenv(racerEnv) != "" }

// runPattern is the -test.run pattern that selects exactly the test named
// name (a "/"-separated subtest path).
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// racerData is what racer id writes to key: distinct per racer and key, so
// the parent can tell whose bytes an object holds.
func racerData(key string, id, size int) []byte {
	return payload(key+"/racer/"+strconv.Itoa(id), size)
}

// runRacer is Run in a child process. Protocol on stdin: the first line is
// the base64 config; then lines "put KEY SIZE". Answers on stdout, one line
// each, prefixed by linePrefix: "ready", then "won KEY", "taken KEY" or
// "error KEY MESSAGE". It returns when stdin closes.
func runRacer(t *testing.T, h Harness) {
	id, err := strconv.Atoi(os.Getenv(racerEnv))
	if err != nil {
		t.Fatalf("storagetest racer: bad %s: %v", racerEnv, err)
	}
	say := func(format string, args ...any) {
		// One write per line: the parent reads whole lines.
		fmt.Fprintf(os.Stdout, linePrefix+format+"\n", args...)
	}
	in := bufio.NewReader(os.Stdin)
	first, err := in.ReadString('\n')
	if err != nil {
		say("error - reading config: %v", err)
		return
	}
	config, err := base64.StdEncoding.DecodeString(strings.TrimSpace(first))
	if err != nil {
		say("error - decoding config: %v", err)
		return
	}
	ctx := t.Context()
	st, err := h.Open(ctx, config)
	if err != nil {
		say("error - Open: %v", err)
		return
	}
	defer st.Close()
	say("ready")
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return
		}
		var key string
		var size int
		if _, err := fmt.Sscanf(line, "put %s %d", &key, &size); err != nil {
			say("error - bad command %q", line)
			return
		}
		switch err := st.PutIfAbsent(ctx, key, racerData(key, id, size)); {
		case err == nil:
			say("won %s", key)
		case errors.Is(err, stream.ErrAlreadyExists):
			say("taken %s", key)
		default:
			say("error %s %s", key, strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
}

// racer is the parent's handle on one child process.
type racer struct {
	id    int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	out   *lockedBuffer
}

// lockedBuffer keeps a child's whole output for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startRacer(t *testing.T, id int, pattern string, config []byte) *racer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.count=1", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), racerEnv+"="+strconv.Itoa(id))
	r := &racer{id: id, cmd: cmd, lines: make(chan string, 16), out: &lockedBuffer{}}
	cmd.Stderr = r.out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting racer process %d (%s): %v", id, os.Args[0], err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(r.out, line)
			if rest, ok := strings.CutPrefix(line, linePrefix); ok {
				r.lines <- rest
			}
		}
		close(r.lines)
	}()
	t.Cleanup(func() {
		r.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && !t.Failed() {
				t.Errorf("racer process %d exited: %v\n%s", id, err, r.out)
			}
		case <-time.After(raceWait):
			cmd.Process.Kill()
			<-done
			t.Errorf("racer process %d did not exit after its input closed\n%s", id, r.out)
		}
	})
	if _, err := fmt.Fprintf(r.stdin, "%s\n", base64.StdEncoding.EncodeToString(config)); err != nil {
		t.Fatalf("racer %d: sending config: %v", id, err)
	}
	return r
}

// next waits for the racer's next protocol line.
func (r *racer) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			t.Fatalf("racer process %d ended early; its output:\n%s", r.id, r.out)
		}
		return line
	case <-time.After(raceWait):
		t.Fatalf("racer process %d: no answer within %v; its output:\n%s", r.id, raceWait, r.out)
	}
	return ""
}

// raceSizes are the object sizes of the trials, cycled: small objects race
// on the name, large ones also on the writing.
func raceSizes(max int) []int { return []int{1, 4 << 10, 100, max / 4, 0, max} }

// testProcessRace: h.Racers OS processes put-if-absent the same key, h.Trials
// times; exactly one wins every time, and the key holds its bytes whole.
func testProcessRace(t *testing.T, h Harness, pattern string) {
	config := h.NewConfig(t)
	st := open(t, h, config)
	racers := make([]*racer, h.Racers)
	for i := range racers {
		racers[i] = startRacer(t, i, pattern, config)
	}
	for _, r := range racers {
		if line := r.next(t); line != "ready" {
			t.Fatalf("racer %d: %s\n%s", r.id, line, r.out)
		}
	}
	sizes := raceSizes(h.MaxObjectBytes)
	wins := make([]int, h.Racers)
	for trial := range h.Trials {
		key := fmt.Sprintf("race/%d/c/%020d", trial%3, trial)
		size := sizes[trial%len(sizes)]
		// Rotate who hears first, so every racer gets a head start sometimes.
		for i := range racers {
			r := racers[(i+trial)%len(racers)]
			if _, err := fmt.Fprintf(r.stdin, "put %s %d\n", key, size); err != nil {
				t.Fatalf("racer %d: %v\n%s", r.id, err, r.out)
			}
		}
		winner := -1
		for _, r := range racers {
			line := r.next(t)
			switch {
			case line == "won "+key:
				if winner >= 0 {
					t.Fatalf("trial %d: racer processes %d and %d both won PutIfAbsent(%q)", trial, winner, r.id, key)
				}
				winner = r.id
			case line == "taken "+key:
			default:
				t.Fatalf("trial %d: racer %d answered %q", trial, r.id, line)
			}
		}
		if winner < 0 {
			t.Fatalf("trial %d: no racer process won PutIfAbsent(%q)", trial, key)
		}
		wins[winner]++
		got := mustGet(t, st, key, 0, -1)
		checkBytes(t, fmt.Sprintf("trial %d: %s holds racer %d's bytes", trial, key, winner), got, racerData(key, winner, size))
	}
	t.Logf("%d trials, %d processes: wins per process %v", h.Trials, h.Racers, wins)
}
