package discovery

import "fmt"

// Searches names the searches Locate makes for a Node with keys k, in the
// order it makes them: its strongest key's (lookup), then, while none has
// found its VM and none has failed, the fallbacks. Each is named as the
// Trace names its answers (TraceAnswer.Lookup), so that `diagnose` states
// the search order this code follows rather than restating it. An error
// is a providerID or system UUID that cannot be parsed (Locate fails the
// same way).
func (k NodeKeys) Searches() ([]string, error) {
	const op = "discovery.NodeKeys.Searches"
	l, err := k.lookup()
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, k.Name, err)
	}
	out := []string{l.what}
	for _, f := range k.fallbacks() {
		out = append(out, f.what)
	}
	return out, nil
}
