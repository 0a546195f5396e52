package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cmd/vsphere-federated-ccm/check"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// Exit codes of the operator commands (validate, diagnose).
const (
	exitOK     = 0 // every check passed; the Node(s) would initialize
	exitFailed = 1 // a check failed; a Node would not initialize
	exitUsage  = 2 // bad arguments, config or cluster access
)

// operatorReport is an operator command's answer.
type operatorReport interface {
	write(w io.Writer) // for people
	passed() bool
}

func emit(w io.Writer, asJSON bool, rep operatorReport) int {
	if asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		_, _ = w.Write(append(b, '\n'))
	} else {
		rep.write(w)
	}
	if !rep.passed() {
		return exitFailed
	}
	return exitOK
}

// kubeClient is the API client of the operator commands (validate,
// diagnose): --kubeconfig when set, else in-cluster (the Pod's
// ServiceAccount). userAgent names the command in the API server's
// audit log.
func kubeClient(kubeconfig, userAgent string) (kubernetes.Interface, error) {
	const op = "main.kubeClient"
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	cfg.UserAgent = userAgent
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return client, nil
}

const validateUsage = `Usage: vsphere-federated-ccm validate --cloud-config FILE|- [flags]

Checks a cloud config before it goes live, with the CCM's own parser and
connection code: offline, every problem by path and line; online (default),
per vCenter in parallel and read-only: TCP, TLS (the server's thumbprints on
a verification failure), login, datacenters, the zone and region tag
categories, privileges, VMs visible and latency. Exit code 0 only when
everything passes, 1 when a check fails, 2 on a usage error.

Flags:
`

// validateReport is validate's answer, as -o json prints it.
type validateReport struct {
	Config   configReport    `json:"config"`
	VCenters []vcenterReport `json:"vcenters,omitempty"`
	Passed   bool            `json:"passed"`
}

type configReport struct {
	Verdict  check.Verdict `json:"verdict"`
	Detail   string        `json:"detail"`
	Notices  []string      `json:"notices,omitempty"`
	VCenters int           `json:"vcenters"`
}

type vcenterReport struct {
	Name   string         `json:"name"`
	Server string         `json:"server"`
	Checks []check.Result `json:"checks"`
}

func runValidate(args []string, stdin io.Reader, stdout, stderr io.Writer, build cloud.BuildInfo) int {
	fs := pflag.NewFlagSet("validate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, validateUsage+fs.FlagUsages()) }
	path := fs.String("cloud-config", "", "the cloud config to check, YAML or INI; - reads standard input")
	offline := fs.Bool("offline", false, "parse and validate only; contact no vCenter and no API server")
	strict := fs.Bool("strict", false, "unknown keys and keys CPI reads but this CCM ignores are errors")
	output := fs.StringP("output", "o", "table", "table or json")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for the Secrets the config names; default in-cluster")
	timeout := fs.Duration("timeout", 30*time.Second, "deadline for each vCenter's checks")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *path == "" || fs.NArg() > 0 || (*output != "table" && *output != "json") {
		fs.Usage()
		return exitUsage
	}
	data, err := readConfig(*path, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "validate: --cloud-config %s: %v\n", *path, err)
		return exitUsage
	}
	rep, cfg := validateConfig(data, *strict)
	if rep.Passed && !*offline {
		rep.VCenters = validateVCenters(cfg, *kubeconfig, *timeout, build)
		for _, v := range rep.VCenters {
			for _, c := range v.Checks {
				rep.Passed = rep.Passed && c.Verdict != check.Failed
			}
		}
	}
	return emit(stdout, *output == "json", rep)
}

func readConfig(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(io.LimitReader(stdin, 16<<20))
	}
	return os.ReadFile(path)
}

// validateConfig parses data as the CCM does (CPI's environment
// included); cfg is nil when it does not parse.
func validateConfig(data []byte, strict bool) (rep validateReport, cfg *config.Config) {
	cfg, err := config.ParseIn(data, config.ProcessEnv())
	if err != nil {
		rep.Config = configReport{Verdict: check.Failed, Detail: err.Error()}
		return rep, nil
	}
	var strictErrs []string
	for _, n := range cfg.Notices {
		rep.Config.Notices = append(rep.Config.Notices, n.String())
		if strict && (n.Kind == config.NoticeUnknown || n.Kind == config.NoticeIgnored) {
			strictErrs = append(strictErrs, n.String())
		}
	}
	rep.Config.VCenters = len(cfg.VCenters)
	var names []string
	for _, vc := range cfg.VCenters {
		names = append(names, fmt.Sprintf("%s (%s:%d)", vc.Name, vc.Server, vc.Port))
	}
	if len(strictErrs) > 0 {
		rep.Config.Verdict = check.Failed
		rep.Config.Detail = "--strict: " + strings.Join(strictErrs, "; ")
		return rep, cfg
	}
	rep.Config.Verdict = check.Passed
	rep.Config.Detail = fmt.Sprintf("%d vCenter(s): %s", len(cfg.VCenters), strings.Join(names, ", "))
	if len(cfg.Notices) > 0 {
		rep.Config.Detail += fmt.Sprintf("; %d notice(s)", len(cfg.Notices))
	}
	rep.Passed = true
	return rep, cfg
}

// validateVCenters runs every vCenter's checks in parallel, each under
// timeout, with the credentials the CCM would use.
func validateVCenters(cfg *config.Config, kubeconfig string, timeout time.Duration, build cloud.BuildInfo) []vcenterReport {
	var secrets *credentials.Secrets
	var secretsErr error
	if slices.ContainsFunc(cfg.VCenters, func(vc config.VCenter) bool { return vc.CredentialsFrom == config.FromSecret }) {
		var client kubernetes.Interface
		if client, secretsErr = kubeClient(kubeconfig, build.UserAgent()+" (validate)"); secretsErr == nil {
			secrets = credentials.NewSecrets(client, nil)
			defer secrets.Close()
		}
	}
	var categories []string
	if cfg.Labels.Zone != "" && cfg.Labels.Region != "" {
		categories = []string{cfg.Labels.Zone, cfg.Labels.Region}
	}
	out := make([]vcenterReport, len(cfg.VCenters))
	var wg sync.WaitGroup
	for i, vc := range cfg.VCenters {
		out[i] = vcenterReport{Name: vc.Name, Server: vc.Server}
		if vc.CredentialsFrom == config.FromSecret && secretsErr != nil && vc.User == "" {
			out[i].Checks = []check.Result{{Name: check.Login, Verdict: check.Failed,
				Detail: fmt.Sprintf("Secret %s/%s cannot be read: %v", vc.SecretNamespace, vc.SecretName, secretsErr)}}
			continue
		}
		wg.Go(func() {
			b := vsphere.New(vsphere.Options{
				Config: vc, Credentials: credentials.ForVCenter(cfg, vc, secrets, nil),
				UserAgent: build.UserAgent() + " (validate)",
			})
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			out[i].Checks = check.VCenter(ctx, vc, b, categories)
			closeCtx, closeCancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer closeCancel()
			_ = b.Close(closeCtx)
		})
	}
	wg.Wait()
	return out
}

// marks show the verdicts in the table.
var marks = map[check.Verdict]string{check.Passed: "✓", check.Failed: "✗", check.Warned: "!", check.Skipped: "–"}

func (rep validateReport) passed() bool { return rep.Passed }

func (rep validateReport) write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VCENTER\tCHECK\t\tDETAIL")
	// A config error of several problems, one a line, goes below the table.
	configDetail := strings.TrimSpace(rep.Config.Detail)
	first, _, multiline := strings.Cut(configDetail, "\n")
	if multiline {
		first = strings.TrimSuffix(first, ":") + " (below)"
	}
	fmt.Fprintf(tw, "-\tconfig\t%s\t%s\n", marks[rep.Config.Verdict], oneLine(first))
	for _, v := range rep.VCenters {
		for _, c := range v.Checks {
			detail := c.Detail
			if c.Took > 0 && c.Verdict != check.Skipped {
				detail += " [" + roundTook(c.Took).String() + "]"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Name, c.Name, marks[c.Verdict], oneLine(detail))
		}
	}
	_ = tw.Flush()
	if rep.Config.Verdict == check.Failed && multiline {
		fmt.Fprintf(w, "\n%s\n\n", configDetail)
	}
	for _, n := range rep.Config.Notices {
		fmt.Fprintf(w, "notice: %s\n", n)
	}
	if rep.Passed {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}

// roundTook keeps two or three significant digits.
func roundTook(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// oneLine keeps a table row on one line (a config error lists one
// problem per line).
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}
