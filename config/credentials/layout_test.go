package credentials_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// want is what one server's lookup gives: credentials, or an error that is
// absence (ErrNoCredentials) or names what is wrong (errHas).
type want struct {
	server string
	creds  credentials.Credentials
	absent bool   // errors.Is(err, ErrNoCredentials)
	errHas string // the error (not absence) contains this
}

func userPass(u, p string) credentials.Credentials {
	return credentials.Credentials{User: u, Password: config.Password(p)}
}

func sessionService(u, tok string) credentials.Credentials {
	return credentials.Credentials{SessionServiceURL: u, SessionServiceToken: config.Password(tok)}
}

// Values used in the cases; every password and token contains "pw-" or
// "tok-" so that no error is found quoting one.
const (
	testUser         = "Admin"
	testPassword     = "pw-Password"
	testIP           = "10.20.30.40"
	testIPv6         = "fd01::1"
	testServiceURL   = "https://something.tld/session"
	testServiceToken = "tok-token"
)

// layoutCases are CPI's credential manager test cases
// (pkg/common/credentialmanager/credentialmanager_test.go), each under
// CPI's test and case name, with our outcome; where CPI's parser returns an
// error for the whole Secret and ours does not, the comment says why (see
// also layout.go): CPI keeps what it parsed before the error and serves it
// from the next call on, so those keys cost the servers that are fine
// nothing; we ignore them at once, and name them in the error of a server
// that finds nothing.
var layoutCases = []struct {
	name  string
	data  map[string]string
	wants []want
}{
	// TestParseSecretConfig
	{"TestParseSecretConfig/Valid username and password",
		map[string]string{"10.20.30.40.username": testUser, "10.20.30.40.password": testPassword},
		[]want{{server: testIP, creds: userPass(testUser, testPassword)}}},
	{"TestParseSecretConfig/Valid username and password with suffix '\\n'",
		map[string]string{"10.20.30.40.username": testUser + "\n", "10.20.30.40.password": testPassword + "\n"},
		[]want{{server: testIP, creds: userPass(testUser, testPassword)}}},
	// CPI: ErrUnknownSecretKey for the Secret. Ours: the server's entry
	// is partial (no username), and the error names the key ignored.
	{"TestParseSecretConfig/Invalid username key with valid password key",
		map[string]string{"10.20.30.40.usernam": testUser, "10.20.30.40.password": testPassword},
		[]want{{server: testIP, errHas: `key 10.20.30.40.username is missing or empty; keys ignored: "10.20.30.40.usernam"`}}},
	{"TestParseSecretConfig/Missing username",
		map[string]string{"10.20.30.40.password": testPassword},
		[]want{{server: testIP, errHas: "key 10.20.30.40.username is missing or empty"}}},
	{"TestParseSecretConfig/Missing password",
		map[string]string{"10.20.30.40.username": testUser},
		[]want{{server: testIP, errHas: "key 10.20.30.40.password is missing or empty"}}},
	{"TestParseSecretConfig/Missing session manager token",
		map[string]string{"10.20.30.40.vc-session-manager-url": testServiceURL},
		[]want{{server: testIP, creds: sessionService(testServiceURL, "")}}},
	{"TestParseSecretConfig/Missing session manager url",
		map[string]string{"10.20.30.40.vc-session-manager-token": testServiceToken},
		[]want{{server: testIP, errHas: "key 10.20.30.40.vc-session-manager-token is set but 10.20.30.40.vc-session-manager-url is not"}}},
	{"TestParseSecretConfig/Valid session manager configuration",
		map[string]string{"10.20.30.40.vc-session-manager-url": testServiceURL, "10.20.30.40.vc-session-manager-token": testServiceToken},
		[]want{{server: testIP, creds: sessionService(testServiceURL, testServiceToken)}}},
	// CPI: ErrUnknownSecretKey. Ours: nothing for the server; the key is named.
	{"TestParseSecretConfig/IP with unknown key",
		map[string]string{"10.20.30.40": testUser},
		[]want{{server: testIP, absent: true, errHas: `keys ignored: "10.20.30.40" (not a key of CPI's layout)`}}},
	{"TestParseSecretConfig/Alternative IPv6 compatible secret",
		map[string]string{
			"username_0": testUser, "password_0": testPassword, "server_0": testIPv6,
			"username_foo": testUser + "foo", "password_foo": testPassword + "foo", "server_foo": testIP,
		},
		[]want{{server: testIPv6, creds: userPass(testUser, testPassword)}, {server: testIP, creds: userPass(testUser+"foo", testPassword+"foo")}}},
	{"TestParseSecretConfig/Alternative IPv6 compatible secret: missing password",
		map[string]string{"username_0": testUser, "server_0": testIPv6},
		[]want{{server: testIPv6, errHas: "key password_0 is missing (server_0 names server fd01::1)"}}},
	{"TestParseSecretConfig/Alternative IPv6 compatible secret: missing username",
		map[string]string{"password_0": testPassword, "server_0": testIPv6},
		[]want{{server: testIPv6, errHas: "key username_0 is missing (server_0 names server fd01::1)"}}},
	// CPI: ErrIncompleteCredentialSet, after parsing set 0: from the
	// next call on it serves fd01::1. Ours: served at once; the orphan
	// is named when a server finds nothing.
	{"TestParseSecretConfig/Alternative IPv6 compatible secret: password with no matching server",
		map[string]string{"username_0": testUser, "password_0": testPassword, "server_0": testIPv6, "password_1": testPassword},
		[]want{{server: testIPv6, creds: userPass(testUser, testPassword)}, {server: testIP, absent: true, errHas: `"password_1" (no "server_1")`}}},
	{"TestParseSecretConfig/Alternative IPv6 compatible secret: username with no matching server",
		map[string]string{"username_0": testUser, "password_0": testPassword, "server_0": testIPv6, "username_1": testPassword},
		[]want{{server: testIPv6, creds: userPass(testUser, testPassword)}, {server: testIP, absent: true, errHas: `"username_1" (no "server_1")`}}},
	// CPI: ErrUnknownSecretKey. Ours: keys without an id name no set.
	{"TestParseSecretConfig/Alternative IPv6 compatible secret: missing suffixes",
		map[string]string{"username_": testUser, "password_": testPassword, "server_": testIPv6},
		[]want{{server: testIPv6, absent: true, errHas: `keys ignored: "password_" (no id), "server_" (no id), "username_" (no id)`}}},
	{"TestParseSecretConfig/Mixing legacy and Alternative IPv6 compatible secret",
		map[string]string{
			"10.20.30.40.username": testUser, "10.20.30.40.password": testPassword,
			"username_0": testUser + "alt", "password_0": testPassword + "alt", "server_0": testIPv6,
		},
		[]want{{server: testIP, creds: userPass(testUser, testPassword)}, {server: testIPv6, creds: userPass(testUser+"alt", testPassword+"alt")}}},
	{"TestParseSecretConfig/Alternative IPv6 compatible secret: server key missing suffix",
		map[string]string{"username_": testUser},
		[]want{{server: testIPv6, absent: true, errHas: `"username_" (no id)`}}},
	{"TestParseSecretConfig/Alternative IPv6 compatible secret: password missing suffix",
		map[string]string{"password_": testPassword},
		[]want{{server: testIPv6, absent: true, errHas: `"password_" (no id)`}}},

	// TestSecretCredentialManagerK8s_GetCredential (its Secrets; the
	// deletion and never-added cases are in TestSecretSourceCPICases).
	{"TestSecretCredentialManagerK8s_GetCredential/Add secret and get credentials",
		map[string]string{"0.0.0.0.username": "user", "0.0.0.0.password": "pw-password"},
		[]want{{server: "0.0.0.0", creds: userPass("user", "pw-password")}}},
	{"TestSecretCredentialManagerK8s_GetCredential/GetCredential should fail to get credentials from empty secrets",
		map[string]string{},
		[]want{{server: "0.0.0.0", absent: true}}},
	{"TestSecretCredentialManagerK8s_GetCredential/GetCredential should fail to get credentials for invalid server",
		map[string]string{"0.0.0.0.username": "user", "0.0.0.0.password": "pw-password"},
		[]want{{server: "1.1.1.1", absent: true, errHas: "none of 1.1.1.1.username/1.1.1.1.password"}}},
	{"TestSecretCredentialManagerK8s_GetCredential/GetCredential for multi-vc",
		map[string]string{"0.0.0.0.username": "user", "0.0.0.0.password": "pw-password", "0.0.1.1.username": "user1", "0.0.1.1.password": "pw-password1"},
		[]want{{server: "0.0.1.1", creds: userPass("user1", "pw-password1")}, {server: "0.0.0.0", creds: userPass("user", "pw-password")}}},
	{"TestSecretCredentialManagerK8s_GetCredential/GetCredential for multi-vc with session manager",
		map[string]string{
			"0.0.0.0.username": "user", "0.0.0.0.password": "pw-password",
			"0.0.1.1.vc-session-manager-url": "https://somemanager.tld/session", "0.0.1.1.vc-session-manager-token": "tok-token",
		},
		[]want{{server: "0.0.1.1", creds: sessionService("https://somemanager.tld/session", "tok-token")}, {server: "0.0.0.0", creds: userPass("user", "pw-password")}}},
	{"TestSecretCredentialManagerK8s_GetCredential/GetCredential for alternative IPv6 server address compatable format",
		map[string]string{
			"username_0": "user", "password_0": "pw-password", "server_0": "0.0.0.0",
			"username_1": "user1", "password_1": "pw-password1", "server_1": testIPv6,
		},
		[]want{{server: "0.0.0.0", creds: userPass("user", "pw-password")}, {server: testIPv6, creds: userPass("user1", "pw-password1")}}},

	// Ours: precedence and partial entries CPI's tests do not cover.
	// CPI parses the alternative form after the first and overwrites it.
	{"alternative form wins over the first for the same server",
		map[string]string{"10.20.30.40.username": "old", "10.20.30.40.password": "pw-old", "server_a": testIP, "username_a": "new", "password_a": "pw-new"},
		[]want{{server: testIP, creds: userPass("new", "pw-new")}}},
	// CPI's login goes through the session service whenever its URL is set.
	{"session service wins over a user and password",
		map[string]string{"10.20.30.40.username": testUser, "10.20.30.40.password": testPassword, "10.20.30.40.vc-session-manager-url": testServiceURL},
		[]want{{server: testIP, creds: sessionService(testServiceURL, "")}}},
	{"session service wins over the alternative form",
		map[string]string{"server_0": testIP, "username_0": testUser, "password_0": testPassword, "10.20.30.40.vc-session-manager-url": testServiceURL, "10.20.30.40.vc-session-manager-token": testServiceToken},
		[]want{{server: testIP, creds: sessionService(testServiceURL, testServiceToken)}}},
	// CPI: an empty URL is no URL; the user and password log in.
	{"empty session service URL: user and password",
		map[string]string{"10.20.30.40.username": testUser, "10.20.30.40.password": testPassword, "10.20.30.40.vc-session-manager-url": "\n"},
		[]want{{server: testIP, creds: userPass(testUser, testPassword)}}},
	{"empty session service URL alone",
		map[string]string{"10.20.30.40.vc-session-manager-url": ""},
		[]want{{server: testIP, errHas: "key 10.20.30.40.vc-session-manager-url is empty"}}},
	// CPI takes whichever set its map iteration meets last.
	{"two sets naming one server, agreeing",
		map[string]string{"server_a": testIP, "username_a": testUser, "password_a": testPassword, "server_b": testIP, "username_b": testUser, "password_b": testPassword},
		[]want{{server: testIP, creds: userPass(testUser, testPassword)}}},
	{"two sets naming one server, differing",
		map[string]string{"server_a": testIP, "username_a": testUser, "password_a": testPassword, "server_b": testIP, "username_b": testUser, "password_b": "pw-other"},
		[]want{{server: testIP, errHas: "server_a and server_b both name server 10.20.30.40, with different credentials"}}},
	// CPI compares server_<id>'s value untrimmed: "fd01::1\n" (kubectl
	// create secret --from-file) names no server there; ours trims it.
	{"alternative form values end with a newline",
		map[string]string{"server_0": testIPv6 + "\n", "username_0": testUser + "\n", "password_0": testPassword + "\n"},
		[]want{{server: testIPv6, creds: userPass(testUser, testPassword)}}},
	{"empty alternative password",
		map[string]string{"server_0": testIPv6, "username_0": testUser, "password_0": ""},
		[]want{{server: testIPv6, errHas: "key password_0 is empty"}}},
	// A key ending in a suffix of the first form but naming no server is
	// ignored (CPI files it under a server named by the whole key).
	{"suffix without a server",
		map[string]string{"username": testUser, "password": testPassword},
		[]want{{server: testIP, absent: true, errHas: `"password" (names no server), "username" (names no server)`}}},
	{"a password with spaces and a trailing newline",
		map[string]string{"vc.example.com.username": " " + testUser + " \n", "vc.example.com.password": " pw- with spaces \r\n"},
		[]want{{server: "vc.example.com", creds: userPass(testUser, " pw- with spaces ")}}},
}

// secretValues lists the secrets among a case's values.
func secretValues(data map[string]string) []string {
	var out []string
	for k, v := range data {
		if strings.Contains(k, "password") || strings.Contains(k, "token") || strings.Contains(v, "pw-") || strings.Contains(v, "tok-") {
			if v = strings.TrimSpace(v); len(v) > 3 {
				out = append(out, v)
			}
		}
	}
	return out
}

func checkWant(t *testing.T, src credentials.Source, w want, secrets []string) {
	t.Helper()
	got, err := src.Get(t.Context())
	if err != nil {
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("%s: the error quotes a secret value: %v", w.server, err)
			}
		}
	}
	switch {
	case w.absent:
		if !errors.Is(err, credentials.ErrNoCredentials) {
			t.Fatalf("%s: Get = %v, %v; want absence (ErrNoCredentials)", w.server, got, err)
		}
		if w.errHas != "" && !strings.Contains(err.Error(), w.errHas) {
			t.Fatalf("%s: err = %v; want it to contain %q", w.server, err, w.errHas)
		}
	case w.errHas != "":
		if err == nil || errors.Is(err, credentials.ErrNoCredentials) || !strings.Contains(err.Error(), w.errHas) {
			t.Fatalf("%s: Get = %v, %v; want an error (not absence) containing %q", w.server, got, err, w.errHas)
		}
	default:
		if err != nil {
			t.Fatalf("%s: Get: %v", w.server, err)
		}
		if got.Fingerprint() != w.creds.Fingerprint() || got.User != w.creds.User || got.SessionServiceURL != w.creds.SessionServiceURL {
			t.Fatalf("%s: Get = %s (password/token %s), want %s", w.server, got, revealed(got), w.creds)
		}
	}
}

// revealed says which secret fields are set, for a failure message.
func revealed(c credentials.Credentials) string {
	return fmt.Sprintf("password set: %v, token set: %v", c.Password != "", c.SessionServiceToken != "")
}

// The key layout as CPI reads it, from a Secret.
func TestSecretLayoutCPICases(t *testing.T) {
	for _, tc := range layoutCases {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "vsconf"}, Data: map[string][]byte{}}
			for k, v := range tc.data {
				s.Data[k] = []byte(v)
			}
			secrets := credentials.NewSecrets(fake.NewClientset(s), nil)
			defer secrets.Close()
			for _, w := range tc.wants {
				checkWant(t, secrets.Source("kube-system", "vsconf", w.server), w, secretValues(tc.data))
			}
		})
	}
}

// The same layout from a secrets directory: CPI builds the same data map
// from the files (name = key) and parses it the same way.
func TestDirectoryLayoutCPICases(t *testing.T) {
	for _, tc := range layoutCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for k, v := range tc.data {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, w := range tc.wants {
				checkWant(t, credentials.Directory{Dir: dir, Server: w.server}, w, secretValues(tc.data))
			}
		})
	}
}

// TestSecretCredentialManagerK8s_GetCredential's cases about the Secret's
// existence.
func TestSecretSourceCPICases(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	secrets := credentials.NewSecrets(client, nil)
	defer secrets.Close()
	src := secrets.Source("kube-system", "vsconf", "0.0.0.0")

	// "Getcredentials should fail by not adding at secret at first time"
	if _, err := src.Get(ctx); !errors.Is(err, credentials.ErrNoCredentials) || !strings.Contains(err.Error(), "kube-system/vsconf not found") {
		t.Fatalf("no Secret yet: err = %v; want absence naming the Secret", err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "vsconf"},
		Data: map[string][]byte{"0.0.0.0.username": []byte("user"), "0.0.0.0.password": []byte("pw-password")}}
	if _, err := client.CoreV1().Secrets("kube-system").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the created Secret's login", func() bool { c, err := src.Get(ctx); return err == nil && c.User == "user" })

	// "Deleting secret should give the credentials from cache": CPI keeps
	// serving a deleted Secret's last contents from memory (until it
	// restarts). Ours differs on purpose: the Secret is gone, and says so
	// (the backend keeps its working session and the CCM raises a
	// CredentialsFailed Event on the Secret); only a new login needs the
	// Secret back.
	if err := client.CoreV1().Secrets("kube-system").Delete(ctx, "vsconf", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted Secret to be ErrNoCredentials", func() bool { _, err := src.Get(ctx); return errors.Is(err, credentials.ErrNoCredentials) })
}

// A rotated Secret in any form is what the next Get returns: user and
// password to the alternative form, then to the session service.
func TestSecretRotationAcrossForms(t *testing.T) {
	ctx := t.Context()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "vsconf"},
		Data: map[string][]byte{testIP + ".username": []byte(testUser), testIP + ".password": []byte("pw-1")}}
	client := fake.NewClientset(s)
	secrets := credentials.NewSecrets(client, nil)
	defer secrets.Close()
	src := secrets.Source("kube-system", "vsconf", testIP)
	for _, data := range []map[string]string{
		{"server_x": testIP, "username_x": testUser, "password_x": "pw-2"},
		{testIP + ".vc-session-manager-url": testServiceURL, testIP + ".vc-session-manager-token": "tok-3"},
		{testIP + ".vc-session-manager-url": testServiceURL, testIP + ".vc-session-manager-token": "tok-4"},
	} {
		next := s.DeepCopy()
		next.Data = map[string][]byte{}
		for k, v := range data {
			next.Data[k] = []byte(v)
		}
		if _, err := client.CoreV1().Secrets("kube-system").Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want := userPass(testUser, data["password_x"])
		if u := data[testIP+".vc-session-manager-url"]; u != "" {
			want = sessionService(u, data[testIP+".vc-session-manager-token"])
		}
		waitFor(t, "the rotated Secret's login", func() bool { c, err := src.Get(ctx); return err == nil && c.Fingerprint() == want.Fingerprint() })
	}
}

// A file of the directory that cannot be read is named in the error of a
// server whose credentials may be in it, and costs other servers nothing.
func TestDirectoryUnreadableEntries(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("vc-a.username", "ccm")
	write("vc-a.password", "pw-a")
	if err := syscall.Mkfifo(filepath.Join(dir, "server_b"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	write("username_b", "ccm")
	write("password_b", "pw-b")
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "vc-c.password")); err != nil {
		t.Fatal(err)
	}
	write("vc-c.username", "ccm")

	checkWant(t, credentials.Directory{Dir: dir, Server: "vc-a"}, want{server: "vc-a", creds: userPass("ccm", "pw-a")}, nil)
	// vc-b may be what server_b names: not knowing is not absence.
	checkWant(t, credentials.Directory{Dir: dir, Server: "vc-b"}, want{server: "vc-b", errHas: "server_b: not a regular file"}, nil)
	checkWant(t, credentials.Directory{Dir: dir, Server: "vc-c"}, want{server: "vc-c", errHas: "vc-c.password: not a regular file"}, nil)
	// A directory that does not exist holds nothing.
	checkWant(t, credentials.Directory{Dir: filepath.Join(dir, "nope"), Server: "vc-a"}, want{server: "vc-a", absent: true}, nil)
}

// Credentials never print a secret, in any verb, and name the session
// service by scheme and host only.
func TestCredentialsNeverPrintSecrets(t *testing.T) {
	for _, c := range []credentials.Credentials{
		userPass("ccm", "pw-S3cr3t"),
		sessionService("https://user:pw-inurl@sm.example.com:8443/session/tok-inpath?key=tok-inquery", "tok-bearer"),
	} {
		s := fmt.Sprintf("%v %+v %#v %s", c, c, c, c)
		for _, secret := range []string{"pw-", "tok-"} {
			if strings.Contains(s, secret) {
				t.Fatalf("credentials print a secret: %s", s)
			}
		}
	}
	if got := sessionService("https://user:pw@sm.example.com:8443/x?y=z", "").String(); got != "session manager at https://sm.example.com:8443" {
		t.Fatalf("String = %q", got)
	}
}

// The ignored keys are named in the error of a server that finds nothing,
// at most five of them.
func TestIgnoredKeysHintIsBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("stray%d", i)), []byte("pw-x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := credentials.Directory{Dir: dir, Server: "vc"}.Get(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"stray4" (not a key of CPI's layout) and 3 more`) {
		t.Fatalf("err = %v", err)
	}
}
