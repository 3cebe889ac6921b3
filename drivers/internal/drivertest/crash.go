package drivertest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// KillChild is the parent side of a crash test: it runs the test binary
// again as a writer process that it SIGKILLs. The child runs only the test
// named test, with env ("KEY=VALUE", telling that test it is the writer)
// added to its environment and stdin as its standard input; it is expected
// to write until killed, printing a line per acknowledged write.
//
// KillChild passes each line the child prints, in order, to ready until
// ready reports true (a nil ready is ready at once), the child ends, or a
// minute passes; it then waits extra more, SIGKILLs the child, and returns
// every line the child printed (those after ready included, up to the kill)
// and its pid. The error says why when the child could not start or ended
// by itself before the kill (with its standard error).
func KillChild(test, env string, stdin []byte, ready func(line string) bool, extra time.Duration) ([]string, int, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, fmt.Errorf("writer process for %s: %w", test, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("writer process for %s: %w", test, err)
	}
	var lines []string // the reader's until done is closed
	reached, done := make(chan struct{}), make(chan struct{})
	if ready == nil {
		close(reached)
	}
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if ready != nil && ready(sc.Text()) {
				close(reached)
				ready = nil
			}
		}
	}()
	select {
	case <-reached:
	case <-done: // the writer ended by itself: a failure, reported below
	case <-time.After(time.Minute):
	}
	time.Sleep(extra)
	cmd.Process.Kill()
	<-done // everything written to the pipe before the kill is read
	werr := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); !ok || !ws.Signaled() {
		return lines, cmd.Process.Pid, fmt.Errorf("writer process for %s ended by itself (%v) before the kill:\n%s\n%s",
			test, werr, strings.Join(lines, "\n"), stderr.String())
	}
	return lines, cmd.Process.Pid, nil
}
