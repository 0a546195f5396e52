package e2e

// vSphere SSO locks an account out after 5 failed logins in 180 s. One
// CCM process keeps a stale password's refusals to its schedule (the
// first login, then one after --refused-credentials-retry, after twice
// it, …: at most 2 in any 1.5 × retry); with several replicas only the
// leader may follow it: a standby sends no credentials the leader has
// not logged in with, and retries none vCenter refused. Nor does a
// backend rebuilt by a config edit send the refused password again at
// once: the refusals are the process's, not the backend's.
//
// Three replicas with leader election, one vCenter, the Secret holding a
// wrong password: the vCenter's own record of the refused logins
// (vcsim.VCenter.Refusals) must show the leader's schedule alone, a
// rebuild in the middle included. Then the Secret gets the right
// password and every replica logs in: the leader at once, the standbys
// once the leader has.
//
// With --refused-credentials-retry=4s the run takes about a minute
// (one control plane, 34 s of schedule, the recovery): the same with
// -short, whose windows it already is.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/soap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

const (
	// lockoutRetry is --refused-credentials-retry: retries fall due 4, 8,
	// 16 and 32 s (8× at most) after each refusal.
	lockoutRetry = 4 * time.Second
	// lockoutWindow is how long after the first refusal the schedule is
	// watched: the first four of the leader's refusals (0, 4, 12 and 28 s)
	// and a few seconds more, the next one being due at 60 s.
	lockoutWindow = 34 * time.Second
	// lockoutEarly is how much earlier than its schedule a retry may
	// reach vCenter: none may (the CCM times a refusal once it got the
	// answer, after vCenter recorded it); this absorbs timer granularity.
	lockoutEarly = 250 * time.Millisecond
	// lockoutSlack is the refusals allowed beyond the schedule's count.
	lockoutSlack = 1
	// lockoutRecovery bounds every replica's login once the Secret holds
	// the right password: a standby is told of the leader's login (its
	// record read every 2 s) and logs in then, not at its watch's next
	// retry (16-18 s later here before it was told).
	lockoutRecovery = 10 * time.Second
	lockoutLease    = "lockout-ccm"
)

// retryWait is the product's wait after the n-th refusal in a row (n ≥ 1):
// the retry doubled n-1 times, at most 8×.
func retryWait(n int) time.Duration {
	d := lockoutRetry
	for i := 1; i < n && d < 8*lockoutRetry; i++ {
		d *= 2
	}
	return min(d, 8*lockoutRetry)
}

// scheduled is how many refusals the leader's schedule alone makes within
// d of its first: the first, and each retry whose waits add up within d.
func scheduled(d time.Duration) int {
	n, at := 1, time.Duration(0)
	for {
		at += retryWait(n)
		if at > d {
			return n
		}
		n++
	}
}

// vcentersView is what a replica's /vcenters says of one vCenter.
type vcentersView struct {
	Name    string `json:"name"`
	Session *struct {
		LoggedIn    time.Time `json:"loggedIn"`
		Credentials string    `json:"credentials"`
	} `json:"session"`
	RefusedCredentials []struct {
		Source   string    `json:"source"`
		Refusals int       `json:"refusals"`
		Last     time.Time `json:"lastRefused"`
		Retry    time.Time `json:"retry"`
	} `json:"refusedCredentials"`
	Reachability string `json:"reachability"`
	LastError    string `json:"lastError"`
}

// lockoutReplica is one CCM replica and the port of its /vcenters.
type lockoutReplica struct {
	*harness.CCMProcess
	port int
}

func (r lockoutReplica) vcenter(ctx context.Context, token, name string) (vcentersView, error) {
	code, body, err := harness.GetLocalHTTPS(ctx, r.port, "/vcenters", token)
	if err != nil {
		return vcentersView{}, err
	}
	if code != http.StatusOK {
		return vcentersView{}, fmt.Errorf("%s /vcenters: %d %s", r.Name, code, body)
	}
	var got struct {
		VCenters []vcentersView `json:"vcenters"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		return vcentersView{}, fmt.Errorf("%s /vcenters: %w\n%s", r.Name, err, body)
	}
	for _, v := range got.VCenters {
		if v.Name == name {
			return v, nil
		}
	}
	return vcentersView{}, fmt.Errorf("%s /vcenters: no %s in %s", r.Name, name, body)
}

func TestLockoutBoundAcrossReplicas(t *testing.T) {
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		t.Skipf("no kube-apiserver in %q (run test/provision.sh, or set KUBEBUILDER_ASSETS): %v", assets, err)
	}
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 1})
	ctx := t.Context()
	vc := env.Fed.VCenters[0]
	stale := "Stale-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	must(t, env.SetSecretPassword(ctx, vc.Host, stale))
	if r := vc.Refusals(vc.User); len(r) != 0 {
		t.Fatalf("fixture: %d refusals before any CCM ran", len(r))
	}
	vm := vc.VMs[0]
	createNodes(t, env, []*vcsim.VM{vm})
	reader := readerToken(t, env, "vcenters-reader", "/vcenters")
	scraper := metricsReaderToken(t, env)

	// Three replicas at once, as a Deployment's or a control plane's
	// DaemonSet's pods start.
	var replicas []lockoutReplica
	for _, name := range []string{"ccm-a", "ccm-b", "ccm-c"} {
		port, err := harness.FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		p, err := env.StartCCM(name, harness.CCMOptions{LeaderElect: true, LeaseName: lockoutLease, Flags: map[string]string{
			"refused-credentials-retry": lockoutRetry.String(),
			"vcenters-port":             strconv.Itoa(port),
		}})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, lockoutReplica{p, port})
	}
	started := time.Now()
	for _, r := range replicas {
		if err := r.WaitHealthy(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := leaseHolder(ctx, env, lockoutLease, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	procs := make([]*harness.CCMProcess, len(replicas))
	for i, r := range replicas {
		procs[i] = r.CCMProcess
	}
	leaderProc, _ := identify(t, procs, holder)
	t.Logf("LOCKOUT leader %s (%s)", leaderProc.Name, holder)

	var first time.Time
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if r := vc.Refusals(vc.User); len(r) > 0 {
			first = r[0]
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatalf("vCenter refused no login within a minute of the replicas' start")
	}
	t.Logf("LOCKOUT first refusal %.3fs after the replicas started", first.Sub(started).Seconds())
	rel := func(ts []time.Time) string {
		out := make([]string, len(ts))
		for i, at := range ts {
			out[i] = fmt.Sprintf("+%.3fs", at.Sub(first).Seconds())
		}
		return "[" + strings.Join(out, " ") + "]"
	}
	// report tells, for a failure, who sent what: each replica's own
	// record of its refusals and its log lines about logins.
	report := func() {
		for _, r := range replicas {
			v, err := r.vcenter(ctx, reader, vc.Name)
			role := "standby"
			if r.CCMProcess == leaderProc {
				role = "leader"
			}
			if err != nil {
				t.Logf("LOCKOUT %s (%s): %v", r.Name, role, err)
			} else {
				b, _ := json.Marshal(v.RefusedCredentials)
				t.Logf("LOCKOUT %s (%s): reachability %s, session %v, refusedCredentials %s, lastError %q", r.Name, role, v.Reachability, v.Session != nil, b, v.LastError)
			}
			for _, line := range loginLines(r.CCMProcess) {
				t.Logf("LOCKOUT %s: %s", r.Name, line)
			}
		}
		if cm, err := env.Client.CoreV1().ConfigMaps(harness.Namespace).Get(ctx, stateConfigMap, metav1.GetOptions{}); err == nil {
			t.Logf("LOCKOUT configmap %s key logins: %s", stateConfigMap, cm.Data["logins"])
		} else {
			t.Logf("LOCKOUT configmap %s: %v", stateConfigMap, err)
		}
	}

	// The rebuild: right after a refusal (the third when the schedule
	// holds, whose retry is due 16 s later) every replica's backend of
	// the vCenter is built anew by a connection setting: the vCenter's
	// certificate pinned by its thumbprint. No refusal may follow it.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 25*time.Second, true, func(context.Context) (bool, error) {
		return len(vc.Refusals(vc.User)) >= 3, nil
	}); err != nil {
		t.Logf("LOCKOUT fewer than 3 refusals %.1fs after the first: %s", time.Since(first).Seconds(), rel(vc.Refusals(vc.User)))
	}
	before := vc.Refusals(vc.User)
	last := before[len(before)-1]
	time.Sleep(time.Until(last.Add(time.Second)))
	thumbprint := soap.ThumbprintSHA256(vc.Server.Certificate())
	section := "  " + vc.Name + ":\n"
	edited := strings.Replace(env.CloudConfigYAML, section, section+"    thumbprint: \""+thumbprint+"\"\n", 1)
	if edited == env.CloudConfigYAML {
		t.Fatalf("no section %q in the cloud config:\n%s", section, env.CloudConfigYAML)
	}
	// Every replica applies the edit (one more reload counted in its
	// /metrics), so builds the vCenter's backend anew: the thumbprint is
	// a connection setting.
	const reloads = "cloudprovider_vsphere_config_reload_total"
	reloaded := func(ctx context.Context, r lockoutReplica) (float64, error) {
		ss, _, err := r.Scrape(ctx, scraper)
		if err != nil {
			return 0, err
		}
		n, _ := ss.Sum(reloads, "result", "success")
		return n, nil
	}
	reloadsBefore := map[string]float64{}
	for _, r := range replicas {
		n, err := reloaded(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		reloadsBefore[r.Name] = n
	}
	edit := writeConfig(t, env, edited)
	var applied time.Time
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, r := range replicas {
			if n, err := reloaded(ctx, r); err != nil || n <= reloadsBefore[r.Name] {
				return false, nil
			}
		}
		applied = time.Now()
		return true, nil
	}); err != nil {
		report()
		t.Fatalf("not every replica applied the thumbprint's edit within 20s (%s{result=\"success\"})", reloads)
	}
	time.Sleep(time.Until(applied.Add(time.Second)))
	// For the report: the leader's new backend tried at once, and held the
	// password back (its log says so).
	rebuilt := regexp.MustCompile(`insecureFlag is overridden`)
	if log := leaderProc.Log(); rebuilt.MatchString(log) {
		after := log[rebuilt.FindStringIndex(log)[1]:]
		t.Logf("LOCKOUT the leader's rebuilt backend held the refused password back at once: %v",
			strings.Contains(after, "refused by vCenter before, not sent again"))
	}
	var afterEdit []time.Time
	due := last.Add(retryWait(len(before)) - lockoutEarly) // the next retry the schedule allows
	for _, at := range vc.Refusals(vc.User) {
		if at.After(edit) && at.Before(due) {
			afterEdit = append(afterEdit, at)
		}
	}
	t.Logf("LOCKOUT rebuild: edit %+.3fs, every replica's backend rebuilt %+.3fs; refusals then %s",
		edit.Sub(first).Seconds(), applied.Sub(first).Seconds(), rel(vc.Refusals(vc.User)))
	if len(afterEdit) > 0 {
		t.Errorf("the rebuilt backends sent the refused password again before its retry (due %+.3fs): refusals %s after the edit at %+.3fs",
			due.Sub(first).Seconds(), rel(afterEdit), edit.Sub(first).Seconds())
	}

	// The rest of the window, then the schedule's bounds.
	time.Sleep(time.Until(first.Add(lockoutWindow)))
	refusals := vc.Refusals(vc.User)
	var inWindow []time.Time
	for _, at := range refusals {
		if !at.After(first.Add(lockoutWindow)) {
			inWindow = append(inWindow, at)
		}
	}
	want := scheduled(lockoutWindow)
	t.Logf("LOCKOUT refusals in %s after the first (retry %s): %d %s; the leader's schedule alone makes %d; allowed %d",
		lockoutWindow, lockoutRetry, len(inWindow), rel(inWindow), want, want+lockoutSlack)
	bad := false
	if len(inWindow) > want+lockoutSlack {
		t.Errorf("%d refusals of %s in %s (one replica's schedule makes %d, %d allowed): %s",
			len(inWindow), vc.User, lockoutWindow, want, want+lockoutSlack, rel(inWindow))
		bad = true
	}
	if err := checkRefusalSchedule(inWindow, rel); err != nil {
		t.Error(err)
		bad = true
	}
	if bad {
		report()
	}

	// The right password: every replica logs in, the standbys once the
	// leader has.
	fixed := time.Now()
	must(t, env.SetSecretPassword(ctx, vc.Host, vc.Password))
	nudgeInitialized(t, env, []*vcsim.VM{vm}, lockoutRecovery)
	t.Logf("LOCKOUT Node %s initialized %.3fs after the right password", vm.Name, time.Since(fixed).Seconds())
	loggedIn := map[string]time.Duration{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, lockoutRecovery, true, func(ctx context.Context) (bool, error) {
		for _, r := range replicas {
			if _, ok := loggedIn[r.Name]; ok {
				continue
			}
			v, err := r.vcenter(ctx, reader, vc.Name)
			if err == nil && v.Session != nil && !v.Session.LoggedIn.Before(fixed.Add(-time.Second)) {
				loggedIn[r.Name] = v.Session.LoggedIn.Sub(fixed)
			}
		}
		return len(loggedIn) == len(replicas), nil
	})
	var ccmSessions []string
	for _, s := range vc.OpenSessions(vc.User) {
		if strings.HasPrefix(s.UserAgent, "vsphere-federated-ccm/") && !s.LoginTime.Before(fixed.Add(-time.Second)) {
			ccmSessions = append(ccmSessions, fmt.Sprintf("%+.3fs", s.LoginTime.Sub(fixed).Seconds()))
		}
	}
	t.Logf("LOCKOUT after the right password: replicas logged in %v; CCM sessions open at vCenter %v (login times after the fix)", loggedIn, ccmSessions)
	if err != nil {
		report()
		t.Fatalf("%d of %d replicas logged in within %s of the right password (%v)", len(loggedIn), len(replicas), lockoutRecovery, loggedIn)
	}
	if len(ccmSessions) < len(replicas) {
		t.Errorf("vCenter holds %d CCM sessions opened since the right password, want one per replica (%d) or more", len(ccmSessions), len(replicas))
	}
	// The whole run, recovery included, kept the schedule, and only the
	// leader was refused (as each replica logs what vCenter refused it).
	all := vc.Refusals(vc.User)
	var sent []string
	for _, r := range replicas {
		n := sentRefused(r.CCMProcess)
		if r.CCMProcess == leaderProc {
			sent = append(sent, fmt.Sprintf("%s (leader) %d", r.Name, n))
			continue
		}
		sent = append(sent, fmt.Sprintf("%s %d", r.Name, n))
		if n > 0 {
			t.Errorf("%s, a standby, logged %d logins vCenter refused: a standby sends no credentials the leader has not logged in with", r.Name, n)
		}
	}
	t.Logf("LOCKOUT refused logins each replica logged: %s", strings.Join(sent, ", "))
	if err := checkRefusalSchedule(all, rel); err != nil {
		t.Error(err)
	}
	t.Logf("LOCKOUT summary: %d refusals in all %s, %.1fs after the first; %d replicas, retry %s", len(all), rel(all), time.Since(first).Seconds(), len(replicas), lockoutRetry)
	if t.Failed() && !bad {
		report()
	}
}

// checkRefusalSchedule is an error unless the refusals keep one process's
// schedule: no window of 1.5 × retry holds more than 2, and each comes no
// earlier than the wait the refusals in a row before it call for.
func checkRefusalSchedule(refusals []time.Time, rel func([]time.Time) string) error {
	var problems []string
	window := lockoutRetry * 3 / 2
	for i := range refusals {
		j := i
		for j+1 < len(refusals) && refusals[j+1].Sub(refusals[i]) < window {
			j++
		}
		if j-i+1 > 2 {
			problems = append(problems, fmt.Sprintf("%d refusals within %s: %s", j-i+1, window, rel(refusals[i:j+1])))
			break
		}
	}
	for n := 1; n < len(refusals); n++ {
		if gap := refusals[n].Sub(refusals[n-1]); gap < retryWait(n)-lockoutEarly {
			problems = append(problems, fmt.Sprintf("refusal %d came %.3fs after refusal %d, before its retry (%s after %d in a row)",
				n+1, gap.Seconds(), n, retryWait(n), n))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the refusals %s are not one process's schedule (retry %s, doubling up to 8×): %s",
			rel(refusals), lockoutRetry, strings.Join(problems, "; "))
	}
	return nil
}

// loginLines are the lines of every log of p about its logins: each one
// vCenter refused, each accepted, its leadership and its backends rebuilt
// with a pinned certificate, for a failure's report.
func loginLines(p *harness.CCMProcess) []string {
	re := regexp.MustCompile(`vCenter refused the credentials|"Logged in"|became leader|insecureFlag is overridden`)
	var out []string
	for _, path := range p.LogPaths() {
		data, _ := os.ReadFile(path)
		for line := range strings.Lines(string(data)) {
			if re.MatchString(line) {
				line = strings.TrimSpace(line)
				if len(line) > 300 {
					line = line[:300] + "…"
				}
				out = append(out, line)
			}
		}
	}
	return out
}

// sentRefused counts the lines of p's logs saying vCenter refused a login
// it sent.
func sentRefused(p *harness.CCMProcess) int {
	n := 0
	for _, path := range p.LogPaths() {
		data, _ := os.ReadFile(path)
		n += strings.Count(string(data), "vCenter refused the credentials")
	}
	return n
}
