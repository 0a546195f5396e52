// Package credentials supplies vCenter logins from where CPI keeps them: a
// Kubernetes Secret or a directory of files, both in CPI's key layout (see
// layout.go: "<server>.username"/"<server>.password", the IPv6-safe
// "server_<id>"/"username_<id>"/"password_<id>", and the session
// service's "<server>.vc-session-manager-url"/"-token"), or the config
// file itself; a Chain tries them in CPI's order. Values are read at every
// login, so a rotated Secret is used by the next one.
package credentials

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Credentials are one vCenter login: a user and password; a solution
// user's certificate and private key, in User and Password (see
// Certificate); or, when SessionServiceURL is set, a session service:
// what CPI calls its shared session manager (vc-session-manager-url), a
// service that hands out clones of a vCenter session (User and Password
// are then unused; named apart from govmomi's session.Manager). They never
// print their values (see String).
type Credentials struct {
	User     string
	Password config.Password
	// SessionServiceURL is asked, with SessionServiceToken as a bearer
	// token (the Pod's service account token when empty), for a clone
	// ticket of a vCenter session.
	SessionServiceURL   string
	SessionServiceToken config.Password
}

// ViaSessionService reports whether c logs in through a session service.
func (c Credentials) ViaSessionService() bool { return c.SessionServiceURL != "" }

// Certificate reports whether c is a solution user's login: a SAML token
// is asked of vCenter's STS with the certificate and key, and the session
// logged in with it. CPI's rule (vclib VSphereConnection.Signer), kept
// exactly: the user value holds a PEM block (any type, text around it
// allowed); the password must then be the certificate's private key (else
// the login fails, see KeyPair). A PEM password with a plain user is a
// password like any other. A session service comes first, as in CPI.
func (c Credentials) Certificate() bool {
	if c.ViaSessionService() {
		return false
	}
	b, _ := pem.Decode([]byte(c.User))
	return b != nil
}

// KeyPair is a certificate login's certificate (User) and private key
// (Password). Its errors name the fields, never a value.
func (c Credentials) KeyPair() (tls.Certificate, error) {
	const op = "credentials.KeyPair"
	pair, err := tls.X509KeyPair([]byte(c.User), []byte(c.Password.Reveal()))
	if err == nil {
		if _, ok := pair.PrivateKey.(*rsa.PrivateKey); !ok {
			// vCenter's STS takes requests signed with RSA only.
			return tls.Certificate{}, fmt.Errorf("%s: user is a PEM certificate (a solution user's login), so password must be its private key, an RSA key", op)
		}
		return pair, nil
	}
	why := "they do not parse"
	if msg := err.Error(); strings.HasPrefix(msg, "tls: ") {
		// crypto/tls's own messages say what is missing or mismatched,
		// without a byte of either (x509's and asn1's may quote some).
		why = strings.TrimPrefix(msg, "tls: ")
	}
	return tls.Certificate{}, fmt.Errorf("%s: user is a PEM certificate (a solution user's login), so password must be its PEM private key: %s", op, why)
}

// String names the login without a secret: the user, the certificate
// login, or the session service's scheme and host (a URL may carry a
// password or a token). It says "session manager", CPI's name, which its
// users know from the keys.
func (c Credentials) String() string {
	switch {
	case c.ViaSessionService():
		return "session manager at " + RedactURL(c.SessionServiceURL)
	case c.Certificate():
		return CertificateLogin
	}
	return fmt.Sprintf("user %q", c.User)
}

// CertificateLogin names a certificate login where a user would be named.
const CertificateLogin = "certificate (solution user)"

// GoString is String: %#v prints no secret either.
func (c Credentials) GoString() string { return c.String() }

// Fingerprint identifies c without holding it, to tell whether credentials
// changed (a certificate's and its key's too: they are User and
// Password); it is never logged.
func (c Credentials) Fingerprint() [32]byte {
	if c.ViaSessionService() {
		return sha256.Sum256([]byte("session-manager\x00" + c.SessionServiceURL + "\x00" + c.SessionServiceToken.Reveal()))
	}
	return sha256.Sum256([]byte("user\x00" + c.User + "\x00" + c.Password.Reveal()))
}

// RedactURL is the scheme and host of a URL, for messages: its user info,
// path and query may hold a secret. A URL that does not parse is named so.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a URL that does not parse)"
	}
	return u.Scheme + "://" + u.Host
}

// ErrNoCredentials is wrapped by a Source's error when it holds nothing for
// its vCenter (as opposed to an entry it cannot use): a Chain then tries
// its next source.
var ErrNoCredentials = errors.New("no credentials")

// Source returns the current credentials of one vCenter server.
type Source interface {
	Get(ctx context.Context) (Credentials, error)
	// String names the source (never its values), for errors and logs.
	String() string
}

// UsernameKey is CPI's Secret key of server's user name.
func UsernameKey(server string) string { return server + "." + keyUser }

// PasswordKey is CPI's Secret key of server's password.
func PasswordKey(server string) string { return server + "." + keyPassword }

// SessionServiceURLKey is CPI's key of server's session service URL.
func SessionServiceURLKey(server string) string { return server + "." + keySessionURL }

// SessionServiceTokenKey is CPI's key of the token for that session service.
func SessionServiceTokenKey(server string) string { return server + "." + keySessionToken }

// Static is a login written in the config file.
type Static Credentials

// Get returns the login; none (ErrNoCredentials) when the user or the
// password is empty: CPI would try it and be refused.
func (s Static) Get(context.Context) (Credentials, error) {
	switch {
	case s.User == "" && s.Password == "":
		return Credentials{}, fmt.Errorf("%s: %w: no user or password", s, ErrNoCredentials)
	case s.User == "":
		return Credentials{}, fmt.Errorf("%s: %w: a password without a user", s, ErrNoCredentials)
	case s.Password == "":
		return Credentials{}, fmt.Errorf("%s: %w: a user without a password", s, ErrNoCredentials)
	}
	return Credentials(s), nil
}
func (s Static) String() string { return "config file" }

// Directory reads a secrets directory: one file per key of CPI's layout, as
// mounted from a Secret volume or written by a vault agent. Every file is
// read at every Get (CPI reads the directory once, at its first need).
type Directory struct {
	Dir    string
	Server string
}

func (d Directory) String() string { return "secrets directory " + d.Dir }

// maxDirectoryEntries bounds the files read: a secrets directory holds a
// few keys per vCenter.
const maxDirectoryEntries = 4096

// Get reads the directory's files for the vCenter, in CPI's layouts.
func (d Directory) Get(context.Context) (Credentials, error) {
	const op = "credentials.Directory.Get"
	entries, err := os.ReadDir(d.Dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Credentials{}, fmt.Errorf("%s: %s: %w: %w", op, d, ErrNoCredentials, err)
	case err != nil:
		return Credentials{}, fmt.Errorf("%s: %w", op, err)
	case len(entries) > maxDirectoryEntries:
		return Credentials{}, fmt.Errorf("%s: %s: more than %d entries: not a secrets directory", op, d, maxDirectoryEntries)
	}
	values := make(map[string]value, len(entries))
	for _, e := range entries {
		// CPI skips directories; "..data" and "..<timestamp>" are a
		// mounted Secret's own (the keys are links through them).
		if e.IsDir() || strings.HasPrefix(e.Name(), "..") {
			continue
		}
		data, err := readSecretFile(filepath.Join(d.Dir, e.Name()))
		if err != nil {
			err = fmt.Errorf("%s: %w", d, err)
		}
		values[e.Name()] = value{data: data, err: err}
	}
	c, err := parseLayout(values, d.String()).lookup(d.Server)
	if err != nil {
		return Credentials{}, fmt.Errorf("%s: %w", op, err)
	}
	return c, nil
}

// ServiceAccountToken reads the token the session service is asked with
// when the credentials carry none (CPI: the Pod's service account token,
// read at every login: a projected token rotates).
func ServiceAccountToken(path string) (config.Password, error) {
	const op = "credentials.ServiceAccountToken"
	data, err := readSecretFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("%s: %s is empty", op, path)
	}
	return config.Password(tok), nil
}

// maxSecretFile bounds a credentials file: a user name or password is a
// few bytes; anything larger is not one.
const maxSecretFile = 64 << 10

// readSecretFile reads a credentials file: a regular file (a mounted
// Secret's key is a symlink to one, which is followed), at most
// maxSecretFile bytes. Opening does not block (O_NONBLOCK: a FIFO would
// wait for a writer), and anything but a regular file — a FIFO, a device
// such as /dev/zero, a directory — is refused before a byte is read.
func readSecretFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxSecretFile {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a credential", path, maxSecretFile)
	}
	return data, nil
}
