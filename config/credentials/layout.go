package credentials

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// CPI's key layout, the same for a Secret's data and for the files of a
// secrets directory (file name = key, content = value). Read from
// kubernetes/cloud-provider-vsphere pkg/common/credentialmanager; the
// behaviour is carried over, the code is ours.
//
//	<server>.username, <server>.password            a user and password
//	<server>.vc-session-manager-url                 a session service (CPI's
//	                                                shared session manager);
//	<server>.vc-session-manager-token               its bearer token (optional:
//	                                                the Pod's service account
//	                                                token when absent)
//	server_<id>, username_<id>, password_<id>       a user and password for the
//	                                                server named by the value of
//	                                                server_<id> (a Secret key
//	                                                cannot hold an IPv6 colon)
//
// Keys are classified in CPI's order: a key ending in "password", then
// "username", "vc-session-manager-url", "vc-session-manager-token" is of
// the first form, its server being what precedes the first
// ".password" (…); otherwise the prefixes "server_", "username_",
// "password_"; anything else is not understood.
//
// For one server S, what logs in is (CPI's precedence):
//  1. S.vc-session-manager-url, when set and not empty: the session service
//     (CPI's login prefers it to any user and password);
//  2. else username_<id>/password_<id> of a server_<id> naming S (CPI parses
//     them after the dotted keys and overwrites those);
//  3. else S.username/S.password.
//
// CPI's parser rejects a whole Secret for a key it does not understand, a
// username_<id>/password_<id> without its server_<id>, a server_ without
// an id, or any server left without a user or password. But it keeps what
// it parsed before failing and serves it from then on (a Secret's parse
// error is returned once per resourceVersion; a secrets directory's is only
// a warning), so in effect those keys cost the other servers nothing. Here
// they are ignored outright, and named in the error of a server that finds
// no usable credentials (never their values). A server whose own entry is
// partial (a user without a password, a token without a URL, a server_<id>
// without username_<id>) is an error, as it is in CPI.
const (
	keyUser           = "username"
	keyPassword       = "password"
	keySessionURL     = "vc-session-manager-url"
	keySessionToken   = "vc-session-manager-token"
	prefixAltServer   = "server_"
	prefixAltUser     = "username_"
	prefixAltPassword = "password_"
)

// value is one key's content, or why it could not be read (a file of a
// secrets directory; the error names the directory and the file, never
// its content).
type value struct {
	data []byte
	err  error
}

// layout is a Secret's or directory's keys, classified.
type layout struct {
	where  string                      // the Secret or directory, for errors
	dotted map[string]map[string]value // the first form: by server, then suffix
	// alt is the alternative form: by prefix (prefixAltServer,
	// prefixAltUser, prefixAltPassword), then by id.
	alt map[string]map[string]value
	// notUnderstood are keys ignored, each with why (names, never values).
	notUnderstood []string
}

func parseLayout(values map[string]value, where string) *layout {
	l := &layout{where: where, dotted: map[string]map[string]value{}, alt: map[string]map[string]value{
		prefixAltServer: {}, prefixAltUser: {}, prefixAltPassword: {},
	}}
	ignore := func(key, why string) { l.notUnderstood = append(l.notUnderstood, fmt.Sprintf("%q (%s)", key, why)) }
keys:
	for _, key := range slices.Sorted(maps.Keys(values)) {
		v := values[key]
		// The first form, by suffix in CPI's order of matching.
		for _, suffix := range [...]string{keyPassword, keyUser, keySessionURL, keySessionToken} {
			if !strings.HasSuffix(key, suffix) {
				continue
			}
			switch server, _, found := strings.Cut(key, "."+suffix); {
			case !found || server == "":
				ignore(key, "names no server")
			case l.dotted[server] == nil:
				l.dotted[server] = map[string]value{suffix: v}
			default:
				l.dotted[server][suffix] = v
			}
			continue keys
		}
		for _, prefix := range [...]string{prefixAltServer, prefixAltUser, prefixAltPassword} {
			if id, ok := strings.CutPrefix(key, prefix); ok {
				l.alt[prefix][id] = v
				continue keys
			}
		}
		ignore(key, "not a key of CPI's layout")
	}
	servers := l.alt[prefixAltServer]
	for prefix, ids := range l.alt {
		for id := range ids {
			switch _, ok := servers[id]; {
			case id == "":
				ignore(prefix, "no id")
				delete(ids, id)
			case !ok:
				ignore(prefix+id, fmt.Sprintf("no %q", prefixAltServer+id))
			}
		}
	}
	slices.Sort(l.notUnderstood)
	return l
}

// text is a value as a string, or the error of reading it; trim says how
// to clean it (files and Secrets often end with a newline).
func (v value) text(trim func(string) string) (string, error) {
	if v.err != nil {
		return "", v.err
	}
	return trim(string(v.data)), nil
}

func trimNewline(s string) string { return strings.TrimRight(s, "\r\n") }

// lookup returns the credentials of server. An error wrapping
// ErrNoCredentials means the layout holds nothing for server; any other
// error is an entry of server's that cannot log in (partial, unreadable,
// ambiguous).
func (l *layout) lookup(server string) (Credentials, error) {
	e := l.dotted[server]
	// 1. The session service: its URL wins over any user and password. A
	// key e lacks reads as empty.
	u, err := e[keySessionURL].text(strings.TrimSpace)
	if err != nil {
		return Credentials{}, err
	}
	if u != "" {
		tok, err := e[keySessionToken].text(strings.TrimSpace)
		if err != nil {
			return Credentials{}, err
		}
		return Credentials{SessionServiceURL: u, SessionServiceToken: config.Password(tok)}, nil
	}
	// 2. The alternative form: server_<id> naming server.
	c, ok, unreadable, err := l.altNaming(server)
	if ok || err != nil {
		return c, err
	}
	// 3. The first form: both user and password.
	_, hasUser := e[keyUser]
	_, hasPassword := e[keyPassword]
	if !hasUser && !hasPassword {
		if unreadable != nil {
			// It may name server: not knowing is not absence.
			return Credentials{}, unreadable
		}
		return Credentials{}, l.nothingFor(server, e)
	}
	user, err := e[keyUser].text(strings.TrimSpace)
	if err != nil {
		return Credentials{}, err
	}
	pass, err := e[keyPassword].text(trimNewline)
	if err != nil {
		return Credentials{}, err
	}
	switch {
	case user == "":
		return Credentials{}, fmt.Errorf("%s: key %s is missing or empty%s", l.where, UsernameKey(server), l.hint())
	case pass == "":
		return Credentials{}, fmt.Errorf("%s: key %s is missing or empty%s", l.where, PasswordKey(server), l.hint())
	}
	return Credentials{User: user, Password: config.Password(pass)}, nil
}

// altNaming reads the server_<id> sets naming server; ok is false when
// none does. unreadable is the error of the first server_<id> that could
// not be read.
func (l *layout) altNaming(server string) (c Credentials, ok bool, unreadable, err error) {
	var ids []string
	servers := l.alt[prefixAltServer]
	for _, id := range slices.Sorted(maps.Keys(servers)) {
		name, err := servers[id].text(strings.TrimSpace)
		if err != nil {
			unreadable = cmp.Or(unreadable, err)
			continue
		}
		if name == server {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return Credentials{}, false, unreadable, nil
	}
	first, err := l.altLogin(ids[0], server)
	if err != nil {
		return Credentials{}, false, nil, err
	}
	// CPI takes whichever its map iteration meets last: two sets naming
	// one server are fine only when they agree.
	for _, id := range ids[1:] {
		other, err := l.altLogin(id, server)
		if err != nil || other.Fingerprint() != first.Fingerprint() {
			return Credentials{}, false, nil, fmt.Errorf("%s: %s and %s both name server %s, with different credentials%s",
				l.where, prefixAltServer+ids[0], prefixAltServer+id, server, l.hint())
		}
	}
	return first, true, nil, nil
}

// nothingFor says why e holds no credentials for server: a token without
// a URL, an empty URL, or nothing at all (wrapping ErrNoCredentials).
func (l *layout) nothingFor(server string, e map[string]value) error {
	if _, ok := e[keySessionToken]; ok {
		return fmt.Errorf("%s: key %s is set but %s is not%s",
			l.where, SessionServiceTokenKey(server), SessionServiceURLKey(server), l.hint())
	}
	if _, ok := e[keySessionURL]; ok {
		return fmt.Errorf("%s: key %s is empty%s", l.where, SessionServiceURLKey(server), l.hint())
	}
	return fmt.Errorf("%s: %w for server %s: none of %s/%s, %s, or a %s<id> naming it%s", l.where, ErrNoCredentials,
		server, UsernameKey(server), PasswordKey(server), SessionServiceURLKey(server), prefixAltServer, l.hint())
}

// altLogin is the user and password of set id, which names server.
func (l *layout) altLogin(id, server string) (Credentials, error) {
	get := func(prefix string, trim func(string) string) (string, error) {
		v, ok := l.alt[prefix][id]
		if !ok {
			return "", fmt.Errorf("%s: key %s is missing (%s names server %s)%s",
				l.where, prefix+id, prefixAltServer+id, server, l.hint())
		}
		s, err := v.text(trim)
		if err == nil && s == "" {
			err = fmt.Errorf("%s: key %s is empty (%s names server %s)", l.where, prefix+id, prefixAltServer+id, server)
		}
		return s, err
	}
	user, err := get(prefixAltUser, strings.TrimSpace)
	if err != nil {
		return Credentials{}, err
	}
	pass, err := get(prefixAltPassword, trimNewline)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{User: user, Password: config.Password(pass)}, nil
}

// maxHints bounds the keys named in an error.
const maxHints = 5

// hint names the keys ignored, for an error of a server that found no
// usable credentials: the likely reason.
func (l *layout) hint() string {
	if len(l.notUnderstood) == 0 {
		return ""
	}
	names := l.notUnderstood
	more := ""
	if len(names) > maxHints {
		more = fmt.Sprintf(" and %d more", len(names)-maxHints)
		names = names[:maxHints]
	}
	return fmt.Sprintf("; keys ignored: %s%s", strings.Join(names, ", "), more)
}
