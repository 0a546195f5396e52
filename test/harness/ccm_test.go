package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRaceReports(t *testing.T) {
	dir := t.TempDir()
	const report = "==================\nWARNING: DATA RACE\nWrite at 0x00c000123 by goroutine 7:\n  main.f()\n\nPrevious read at 0x00c000123 by goroutine 8:\n  main.g()\n==================\n"
	clean := filepath.Join(dir, "ccm.1.log")
	racy := filepath.Join(dir, "ccm.2.log")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(clean, []byte("I0101 00:00:00.000000 1 main.go:1] started\n"), 0o600))
	// Two finished reports, then one cut short by a kill.
	must(os.WriteFile(racy, []byte("I0101 started\n"+report+"I0101 more\n"+report+"==================\nWARNING: DATA RACE\nRead at 0x1 by goroutine 9:\n"), 0o600))
	p := &CCMProcess{logs: []string{clean}}
	if r := p.RaceReports(); len(r) != 0 {
		t.Fatalf("reports in a clean log: %q", r)
	}
	p.logs = append(p.logs, racy)
	r := p.RaceReports()
	if len(r) != 3 {
		t.Fatalf("%d reports, want 3: %q", len(r), r)
	}
	for i, rep := range r[:2] {
		if !strings.HasSuffix(rep, strings.TrimSuffix(report, "\n")) || !strings.Contains(rep, "ccm.2.log") || strings.Contains(rep, "more") {
			t.Errorf("report %d: %q", i, rep)
		}
	}
	if !strings.Contains(r[2], "goroutine 9") {
		t.Errorf("unfinished report: %q", r[2])
	}
}
