// Package credentials supplies vCenter logins from where CPI keeps them: a
// Kubernetes Secret (keys "<server>.username" / "<server>.password"), a
// directory of files named the same way, or the config file itself. Values
// are read at every login, so a rotated Secret is used by the next one.
package credentials

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Credentials are one vCenter login.
type Credentials struct {
	User     string
	Password config.Password
}

// Source returns the current credentials of one vCenter server.
type Source interface {
	Get(ctx context.Context) (Credentials, error)
	// String names the source (never its values), for errors and logs.
	String() string
}

// UsernameKey and PasswordKey are CPI's Secret key layout.
func UsernameKey(server string) string { return server + ".username" }
func PasswordKey(server string) string { return server + ".password" }

// Static is a login written in the config file.
type Static Credentials

func (s Static) Get(context.Context) (Credentials, error) { return Credentials(s), nil }
func (s Static) String() string                           { return "config file" }

// Directory reads "<server>.username" and "<server>.password" files, as
// mounted from a Secret volume or written by a vault agent.
type Directory struct {
	Dir    string
	Server string
}

func (d Directory) String() string { return "secrets directory " + d.Dir }

func (d Directory) Get(context.Context) (Credentials, error) {
	const op = "credentials.Directory.Get"
	user, err := readSecretFile(filepath.Join(d.Dir, UsernameKey(d.Server)))
	if err != nil {
		return Credentials{}, fmt.Errorf("%s: %w", op, err)
	}
	pass, err := readSecretFile(filepath.Join(d.Dir, PasswordKey(d.Server)))
	if err != nil {
		// The path names the file, never its content.
		return Credentials{}, fmt.Errorf("%s: %w", op, err)
	}
	return fromValues(string(user), string(pass), d.String(), d.Server)
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

// fromValues checks and trims the two values (files and Secrets often end
// with a newline).
func fromValues(user, pass, where, server string) (Credentials, error) {
	user = strings.TrimSpace(user)
	pass = strings.TrimRight(pass, "\r\n")
	switch {
	case user == "":
		return Credentials{}, fmt.Errorf("%s: key %s is missing or empty", where, UsernameKey(server))
	case pass == "":
		return Credentials{}, fmt.Errorf("%s: key %s is missing or empty", where, PasswordKey(server))
	}
	return Credentials{User: user, Password: config.Password(pass)}, nil
}
