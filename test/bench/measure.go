package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

// procSample is the memory and CPU of a process at one moment, from /proc.
type procSample struct {
	HWMKiB int64         // VmHWM: peak resident set since the process started
	RSSKiB int64         // VmRSS
	CPU    time.Duration // user + system time
}

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// readProc reads pid's memory and CPU; zero values when it is gone.
func readProc(pid int) procSample {
	var s procSample
	if pid == 0 {
		return s
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		s.HWMKiB, s.RSSKiB = statusKiB(data, "VmHWM:"), statusKiB(data, "VmRSS:")
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command name (in parentheses, may hold spaces):
		// state is field 3, utime 14 and stime 15.
		if i := bytes.LastIndexByte(data, ')'); i >= 0 {
			f := strings.Fields(string(data[i+1:]))
			if len(f) > 12 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				s.CPU = time.Duration(ut+st) * clockTick
			}
		}
	}
	return s
}

// statusKiB reads a "Name:   123 kB" line of /proc/<pid>/status.
func statusKiB(data []byte, name string) int64 {
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// selfHWM is this process's peak RSS (it hosts the simulators).
func selfHWM() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return statusKiB(data, "VmHWM:")
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// sample writes a timeline of the run, one line a second: the CCM's memory
// and CPU, Nodes initialized, and vCenter requests so far. The returned
// function stops it.
func (w *world) sample(p *harness.CCMProcess, tr *tracker, t0 time.Time, path string) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		logf("timeline: %v", err)
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	base := w.snapshot()
	go func() {
		defer close(finished)
		defer f.Close()
		bw := bufio.NewWriter(f)
		defer bw.Flush()
		fmt.Fprintln(bw, "seconds,rss_mib,hwm_mib,cpu_seconds,initialized,wire_requests,soap_calls,connections")
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			s, c := readProc(p.Pid()), w.snapshot().sub(base)
			fmt.Fprintf(bw, "%.1f,%.1f,%.1f,%.2f,%d,%d,%d,%d\n", time.Since(t0).Seconds(), mib(s.RSSKiB), mib(s.HWMKiB),
				s.CPU.Seconds(), tr.initializedCount(), c.Wire.Requests, c.SOAPTotal, c.Wire.Connections)
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// pass is the end of one periodic status-update pass of the cloud-node
// controller, as its log line tells.
type pass struct {
	At    time.Time // when the bench read the line (within ~200ms of it)
	Nodes int
	Took  time.Duration
	// Failed counts the Nodes whose lookup failed in the pass: the
	// controller's lookupFailed lines since the previous pass ended.
	// Passes never overlap (the controller runs them one after another)
	// and nothing else logs that line, so each belongs to this pass.
	Failed int
}

// passLine is the cloud-node controller's line at the end of each periodic
// pass (klog V(2), k8s.io/cloud-provider's UpdateNodeStatus).
var passLine = regexp.MustCompile(`Update (\d+) nodes status took ([^ ]+?)\.?$`)

// lookupFailed is the cloud-node controller's error line, during a status
// pass, for a Node whose instance lookup (InstanceMetadata) returned an
// error (k8s.io/cloud-provider's UpdateNodeStatus, klog.Errorf).
const lookupFailed = "Error getting instance metadata for node addresses"

// passScanner turns CCM log lines into passes.
type passScanner struct {
	failed int // lookupFailed lines since the last pass ended
}

// line reads one log line; at the end of a pass it returns the pass.
func (s *passScanner) line(line string, now time.Time) (pass, bool) {
	if strings.Contains(line, lookupFailed) {
		s.failed++
		return pass{}, false
	}
	m := passLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return pass{}, false
	}
	n, _ := strconv.Atoi(m[1])
	took, _ := time.ParseDuration(m[2])
	p := pass{At: now, Nodes: n, Took: took, Failed: s.failed}
	s.failed = 0
	return p, true
}

// watchPasses follows the CCM log and sends each status-update pass's end;
// the channel closes when ctx ends. A receiver that falls behind delays
// the reading, not the timestamps of passes already read.
func watchPasses(ctx context.Context, path string) <-chan pass {
	out := make(chan pass, 1024)
	go func() {
		defer close(out)
		var offset int64
		var partial string
		var scan passScanner
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			f, err := os.Open(path)
			if err != nil {
				continue
			}
			if _, err := f.Seek(offset, io.SeekStart); err != nil {
				f.Close()
				continue
			}
			data, _ := io.ReadAll(f)
			f.Close()
			offset += int64(len(data))
			now := time.Now()
			text := partial + string(data)
			lines := strings.Split(text, "\n")
			partial = lines[len(lines)-1] // not yet terminated
			for _, line := range lines[:len(lines)-1] {
				p, ok := scan.line(line, now)
				if !ok {
					continue
				}
				select {
				case out <- p:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// fetch GETs https://127.0.0.1:<port><path> on the CCM's secure port with
// a bearer token. The CCM serves a self-signed certificate.
func fetch(ctx context.Context, port int, path, token string, timeout time.Duration) ([]byte, error) {
	if port == 0 {
		return nil, errors.New("the CCM has no --secure-port")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives: true,
	}}
	res, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", path, res.Status, body)
	}
	return body, nil
}

// cpuProfileChunk is the length of each CPU profile taken during init: a
// profile cannot be cut short, so init is covered by consecutive chunks
// (merge them with `go tool pprof <binary> cpu-init-*.pb.gz`); the last
// one runs up to this long past the end of init.
const cpuProfileChunk = 5 * time.Second

// cpuProfiles takes consecutive CPU profiles until initCtx ends, starting
// as soon as the secure port answers. It returns the files written.
func (w *world) cpuProfiles(ctx, initCtx context.Context, p *harness.CCMProcess, dir string) []string {
	var files []string
	for initCtx.Err() == nil {
		path := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(cpuProfileChunk/time.Second))
		body, err := fetch(ctx, p.SecurePort, path, w.profToken, cpuProfileChunk+30*time.Second)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) && p.Running() {
				time.Sleep(100 * time.Millisecond) // not serving yet
				continue
			}
			if initCtx.Err() == nil {
				logf("CPU profile: %v", err)
			}
			return files
		}
		file := filepath.Join(dir, fmt.Sprintf("cpu-init-%03d.pb.gz", len(files)))
		if err := os.WriteFile(file, body, 0o644); err != nil {
			logf("CPU profile: %v", err)
			return files
		}
		files = append(files, file)
	}
	return files
}

// heapProfile saves the CCM's heap profile (after a GC) to path.
func (w *world) heapProfile(ctx context.Context, p *harness.CCMProcess, path string) []string {
	body, err := fetch(ctx, p.SecurePort, "/debug/pprof/heap?gc=1", w.profToken, time.Minute)
	if err == nil {
		err = os.WriteFile(path, body, 0o644)
	}
	if err != nil {
		logf("heap profile: %v", err)
		return nil
	}
	return []string{path}
}

// fileSHA256 is the first 12 hex digits of a file's SHA-256, to tell
// binaries apart in the report.
func fileSHA256(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "?"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "?"
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func mib(kib int64) float64          { return float64(kib) / 1024 }
func ms(d time.Duration) float64     { return float64(d) / float64(time.Millisecond) }
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }
