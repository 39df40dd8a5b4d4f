package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one control-plane binary running in its own process group, with
// its output in a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // valid after done is closed
}

func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group so Stop can signal the whole tree; Pdeathsig so a
	// crashed parent does not leave servers behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after the grace period.
func (p *process) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// failure describes why a process did not become ready, with the tail of its log.
func (p *process) failure(reason string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", p.name, reason)
	if p.exited() && p.err != nil {
		fmt.Fprintf(&b, " (%v)", p.err)
	}
	if tail := logTail(p.logPath, 15); tail != "" {
		fmt.Fprintf(&b, "; last lines of %s:\n%s", p.logPath, tail)
	}
	if hint := hintFor(logTail(p.logPath, 200)); hint != "" {
		fmt.Fprintf(&b, "\nhint: %s", hint)
	}
	return errors.New(b.String())
}

// waitFor polls ready until it returns true, the process exits, or the
// context ends.
func (p *process) waitFor(ctx context.Context, ready func(context.Context) bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx) {
			return nil
		}
		select {
		case <-p.done:
			return p.failure("exited before it was ready")
		case <-ctx.Done():
			return p.failure(fmt.Sprintf("was not ready in time: %v", ctx.Err()))
		case <-tick.C:
		}
	}
}

func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// hintFor turns well-known failure messages into advice.
func hintFor(log string) string {
	switch {
	case strings.Contains(log, "address already in use"):
		return "a port is already in use: stop what holds it (ss -ltnp) or let tether pick free ports (port 0)"
	case strings.Contains(log, "exec format error"), strings.Contains(log, "permission denied"):
		return "the cached binary looks damaged: remove the cache entry and run `make controlplane` to rebuild it"
	}
	return ""
}
