package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// No password used in a run reaches a CCM log line, an Event or /metrics:
// rotation (vCenter and Secret changed), a wrong password in the Secret,
// a vCenter rejecting the Secret's password, the way back, and a config
// edit in CPI's INI form rejected for an unfinished escape in its password.
func TestSecretsNeverInLogsOrEvents(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 2})
	vc1, vc2 := env.Fed.VCenter("vc1"), env.Fed.VCenter("vc2")
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	rotated, wrongInSecret, rejected := "Rot8ted-"+stamp, "Wr0ngInSecret-"+stamp, "Ch4ngedAtVC-"+stamp
	passwords := []string{vc1.Password, vc2.Password, rotated, wrongInSecret, rejected}

	createNodes(t, env, []*vcsim.VM{vc1.VMs[0], vc2.VMs[0]})
	// More verbose than the DaemonSet's --v=2 (request bodies start at 8).
	// Step 4 has vc1 take back the password it refused in step 3: sent
	// again after 2 s (not the default's 2 min), it logs in.
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Flags: map[string]string{"v": "4", "refused-credentials-retry": "2s"}})
	waitInitialized(t, env, []string{vc1.VMs[0].Name, vc2.VMs[0].Name}, time.Minute)
	deletions := watchDeletions(t, env)
	ctx := t.Context()

	// 1. Rotation: the vCenter takes the new password, the Secret follows,
	// old sessions are terminated; lookups go on.
	vc2.SetPassword(rotated)
	must(t, env.SetSecretPassword(ctx, vc2.Host, rotated))
	waitEvent(t, env, harness.Namespace, "Secret", harness.SecretName, "CredentialsRotated", 20*time.Second)
	if _, err := vc2.TerminateOtherSessions(ctx); err != nil {
		t.Fatal(err)
	}
	createNodes(t, env, vc2.VMs[1:2])
	nudgeInitialized(t, env, vc2.VMs[1:2], 30*time.Second)

	// 2. A wrong password in the Secret: rejected, the session serves on.
	must(t, env.SetSecretPassword(ctx, vc2.Host, wrongInSecret))
	waitEvent(t, env, harness.Namespace, "Secret", harness.SecretName, "CredentialsFailed", 20*time.Second)

	// 3. vc1 stops accepting the Secret's password: logins fail.
	vc1.SetPassword(rejected)
	if _, err := vc1.TerminateOtherSessions(ctx); err != nil {
		t.Fatal(err)
	}
	setReady(t, env, vc1.VMs[:1], false)
	// Logged by a lookup's error (vcenter vc1: …) or by the probe of vc1
	// while it is down (vcenter="vc1" err=…): both run each second, and
	// the lookup shows the refused login only until the next probe's
	// failure ("refused before") replaces it.
	waitLogMatch(t, ccm, regexp.MustCompile(`vcenter( vc1:|="vc1") .*login as`), 20*time.Second)

	// 4. The way back: vc1 accepts its password again, the Secret holds
	// vc2's rotated one; new Nodes in both initialize.
	vc1.SetPassword(vc1.Password)
	must(t, env.SetSecretPassword(ctx, vc2.Host, rotated))
	createNodes(t, env, []*vcsim.VM{vc1.VMs[1], vc2.VMs[2]})
	nudgeInitialized(t, env, []*vcsim.VM{vc1.VMs[1], vc2.VMs[2]}, 45*time.Second)
	if d := deletions.Deleted(nil); len(d) > 0 {
		t.Fatalf("nodes deleted: %v", d)
	}

	// 5. A config edit in CPI's INI form whose password value ends in an
	// unfinished escape (a backslash right before the end of the line,
	// the file's last): rejected with ConfigInvalid, the last good config
	// keeps serving, and the error names neither the value nor the password.
	unfinished := "S3cr3t-" + stamp
	passwords = append(passwords, unfinished)
	ini := fmt.Sprintf("[Global]\ninsecure-flag = \"1\"\nport = \"%d\"\n\n[VirtualCenter %q]\nuser = %q\npassword = \"%s\\\n",
		env.Proxies["vc1"].Port(), vc1.Host, vc1.User, unfinished)
	writeConfig(t, env, ini)
	e := waitEvent(t, env, harness.Namespace, "Lease", "cloud-controller-manager", "ConfigInvalid", 30*time.Second)
	if !strings.Contains(e.Message, "line 7") { // rejected for the password line, not something else
		t.Errorf("ConfigInvalid Event %q does not point at line 7, the password's", e.Message)
	}
	createNodes(t, env, vc2.VMs[3:4])
	nudgeInitialized(t, env, vc2.VMs[3:4], 30*time.Second) // the last good config serves on

	// Everything the run produced that an operator can read.
	type text struct{ where, body string }
	var texts []text
	lines := 0
	for _, p := range env.CCMs() {
		for _, path := range p.LogPaths() {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(data), "\n") {
				texts = append(texts, text{fmt.Sprintf("%s:%d", filepath.Base(path), i+1), line})
				lines++
			}
		}
	}
	evs, err := env.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, text{fmt.Sprintf("Event %s/%s (%s)", e.Namespace, e.Name, e.Reason), string(b)})
	}
	token := metricsReaderToken(t, env)
	if _, body, err := ccm.Scrape(ctx, token); err != nil {
		t.Fatal(err)
	} else {
		texts = append(texts, text{"/metrics", body})
	}
	found := 0
	for _, pw := range passwords {
		forms := map[string]string{
			"plain":                        pw,
			"base64":                       base64.StdEncoding.EncodeToString([]byte(pw)),
			"base64url":                    base64.URLEncoding.EncodeToString([]byte(pw)),
			"basic auth (user:password)":   base64.StdEncoding.EncodeToString([]byte(vc1.User + ":" + pw)),
			"query-escaped (URL userinfo)": url.QueryEscape(pw),
		}
		for form, needle := range forms {
			for _, tx := range texts {
				if strings.Contains(tx.body, needle) {
					t.Errorf("a password (%.3s…, %s) appears in %s", pw, form, tx.where)
					found++
				}
			}
		}
	}
	// The scan looked at something: the phases left their traces.
	var reasons []string
	for _, e := range evs.Items {
		reasons = append(reasons, e.Reason)
	}
	for _, want := range []string{"CredentialsRotated", "CredentialsFailed", "VMLookupFailed", "ConfigInvalid"} {
		if !slices.Contains(reasons, want) {
			t.Errorf("no %s Event among %v", want, slices.Compact(slices.Sorted(slices.Values(reasons))))
		}
	}
	t.Logf("MEASURE secrets: %d passwords × 5 encodings searched in %d CCM log lines, %d Events and /metrics: %d found",
		len(passwords), lines, len(evs.Items), found)
}

func waitLogMatch(t *testing.T, p *harness.CCMProcess, re *regexp.Regexp, timeout time.Duration) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return re.MatchString(p.Log()), nil
	}); err != nil {
		t.Fatalf("no match of %s in %s's log within %s:\n%s", re, p.Name, timeout, p.Tail(30))
	}
}
