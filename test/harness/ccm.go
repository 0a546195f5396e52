package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// CCMProcess is the CCM binary running as a child process in its own process
// group, its stdout and stderr in one log file per start
// (<dir>/<name>.<n>.log). It dies with its parent (parent death signal) and
// with Shutdown.
type CCMProcess struct {
	Name string
	Bin  string
	Args []string
	// Env is added to this process's environment (the DaemonSet's
	// literal env: DaemonSetEnv).
	Env []string
	Dir string
	// SecurePort is the value of --secure-port in Args (0 when absent).
	SecurePort int

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error
	starts  int
	logs    []string
	untrack func()
}

// StartCCMProcess starts bin with args and env added to this process's
// environment, logging to dir.
func StartCCMProcess(name, bin, dir string, args []string, env ...string) (*CCMProcess, error) {
	p := &CCMProcess{Name: name, Bin: bin, Args: args, Env: env, Dir: dir}
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			p.SecurePort, _ = strconv.Atoi(v)
		}
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *CCMProcess) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("harness: %s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	p.starts++
	logPath := filepath.Join(p.Dir, fmt.Sprintf("%s.%d.log", p.Name, p.starts))
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Bin, p.Args...)
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("harness: starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exitErr = cmd, done, nil
	p.logs = append(p.logs, logPath)
	if p.untrack == nil {
		p.untrack = track(func() { _ = p.Kill() })
	}
	go func() {
		err := cmd.Wait()
		_ = log.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Pid of the current process; 0 when never started.
func (p *CCMProcess) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the current process has not exited.
func (p *CCMProcess) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.done)
}

// ExitErr is the current process's wait error once it exited.
func (p *CCMProcess) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// signal sends sig to the process group and waits up to grace for the exit.
func (p *CCMProcess) signal(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("harness: signal %v to %s: %w", sig, p.Name, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		return fmt.Errorf("harness: %s did not exit within %s of %v", p.Name, grace, sig)
	}
}

// Kill sends SIGKILL to the process group and waits for the exit: a crash,
// no cleanup, the leader lease not released.
func (p *CCMProcess) Kill() error { return p.signal(syscall.SIGKILL, 30*time.Second) }

// Stop asks for a graceful exit (SIGTERM) and kills after 10s.
func (p *CCMProcess) Stop() error {
	if err := p.signal(syscall.SIGTERM, 10*time.Second); err != nil {
		return p.Kill()
	}
	return nil
}

// Restart kills the process if it runs and starts it again with the same
// arguments (same secure port), logging to a new file.
func (p *CCMProcess) Restart() error {
	if err := p.Kill(); err != nil {
		return err
	}
	return p.start()
}

// Close kills the process and forgets it; safe to call more than once.
func (p *CCMProcess) Close() error {
	err := p.Kill()
	p.mu.Lock()
	if p.untrack != nil {
		p.untrack()
		p.untrack = nil
	}
	p.mu.Unlock()
	return err
}

// LogPaths lists the log file of every start, oldest first.
func (p *CCMProcess) LogPaths() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.logs...)
}

// Log returns the log of the current (latest) start.
func (p *CCMProcess) Log() string {
	paths := p.LogPaths()
	if len(paths) == 0 {
		return ""
	}
	b, _ := os.ReadFile(paths[len(paths)-1])
	return string(b)
}

// Tail returns the last n lines of every start's log, for failure reports.
func (p *CCMProcess) Tail(n int) string {
	var b strings.Builder
	for _, path := range p.LogPaths() {
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "==> %s (last %d lines) <==\n%s\n", path, len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}

// raceReport is one report of the race detector: from the line of equals
// signs before "WARNING: DATA RACE" to the next such line.
var raceReport = regexp.MustCompile(`(?m)^==================\nWARNING: DATA RACE\n(?:.*\n)*?==================$`)

// RaceDetected is the line the race detector prints for each race.
const RaceDetected = "WARNING: DATA RACE"

// RaceReports returns every race detector report in the logs of every
// start, each prefixed with its log file's name. A report whose closing
// line is not written yet (the process was killed mid-report) is returned
// from its first line to the end of the log.
func (p *CCMProcess) RaceReports() []string {
	var out []string
	for _, path := range p.LogPaths() {
		data, _ := os.ReadFile(path)
		log := string(data)
		n := strings.Count(log, RaceDetected)
		if n == 0 {
			continue
		}
		found := raceReport.FindAllString(log, -1)
		if len(found) < n {
			// The last one is unfinished: take it to the end.
			i := strings.LastIndex(log, RaceDetected)
			found = append(found, log[i:])
		}
		for _, r := range found {
			out = append(out, fmt.Sprintf("==> %s <==\n%s", filepath.Base(path), r))
		}
	}
	return out
}

// Healthz GETs https://127.0.0.1:<secure port><path> as an anonymous client
// or with a bearer token, and returns the status code and body.
func (p *CCMProcess) Healthz(ctx context.Context, path, token string) (int, string, error) {
	if p.SecurePort == 0 {
		return 0, "", errors.New("harness: no --secure-port")
	}
	return GetLocalHTTPS(ctx, p.SecurePort, path, token)
}

// GetLocalHTTPS GETs https://127.0.0.1:<port><path>, trusting any
// certificate, as an anonymous client or with a bearer token, and returns
// the status code and body.
func GetLocalHTTPS(ctx context.Context, port int, path, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The CCM serves a self-signed certificate generated in memory. No
	// keep-alive: a Transport per call would leave an idle connection, and
	// a goroutine serving it in the CCM (counted in go_goroutines), behind.
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
	res, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(res.Body)
	return res.StatusCode, body.String(), nil
}

// WaitHealthy polls /healthz until it answers 200, failing at once if the
// process exits.
func (p *CCMProcess) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if !p.Running() {
			return false, fmt.Errorf("harness: %s exited: %w\n%s", p.Name, p.ExitErr(), p.Tail(40))
		}
		code, body, err := p.Healthz(ctx, "/healthz", "")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d %s", code, body)
		return code == http.StatusOK, nil
	})
	if err != nil && p.Running() {
		return fmt.Errorf("harness: %s not healthy within %s (last: %s): %w\n%s", p.Name, timeout, last, err, p.Tail(40))
	}
	return err
}
