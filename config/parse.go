package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// StringList is a YAML sequence of strings or one comma-separated string
// (CPI writes datacenters both ways).
type StringList []string

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = splitList(n.Value)
		return nil
	case yaml.SequenceNode:
		var items []string
		if err := n.Decode(&items); err != nil {
			return err
		}
		*l = splitList(strings.Join(items, ","))
		return nil
	}
	// A TypeError, as yaml.v3's own: Parse has already named the key.
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a list or a comma-separated string", n.Line)}}
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Parse decodes and validates a configuration, YAML or CPI's legacy INI,
// in an empty environment (see ParseIn).
func Parse(data []byte) (*Config, error) { return ParseIn(data, Env{}) }

// ParseIn decodes and validates a configuration, YAML or CPI's legacy INI,
// with CPI's environment overrides from env applied. The error lists every
// problem found, each prefixed with the path of the key it concerns. Keys
// that have no effect are not errors (CPI ignores them, and its configs
// must load): they are in Config.Notices.
func ParseIn(data []byte, env Env) (*Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("config is empty")
	}
	var root yaml.Node
	var notices []Notice
	if isINI(data) {
		ini, n, err := iniToYAML(data)
		if err != nil {
			return nil, fmt.Errorf("ini: %w", err)
		}
		root, notices = *ini, n
	} else if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, scrub(err, data)
	}
	w := keyWalk{seen: map[aliasVisit]bool{}, notices: notices, lines: map[string]int{}}
	if len(root.Content) == 1 {
		w.check(root.Content[0], reflect.TypeFor[fileSchema](), "")
	}
	errs := w.errs
	var f fileSchema
	if err := decode(&root, &f); err != nil {
		// The walk has named each value of the wrong type by its path;
		// yaml.v3 only gives their lines.
		var te *yaml.TypeError
		if !errors.As(err, &te) || len(errs) == 0 {
			errs = append(errs, scrub(err, data))
		}
		return nil, format(errs)
	}
	w.notices = append(w.notices, env.apply(&f)...)
	cfg, verrs := f.resolve(w.lines)
	errs = append(errs, verrs...)
	if len(errs) > 0 {
		// A typo is often the cause: name the unknown keys too.
		for _, n := range w.notices {
			if n.Kind == NoticeUnknown {
				errs = append(errs, errors.New(n.String()))
			}
		}
		return nil, format(errs)
	}
	cfg.Notices = append(w.notices, cfg.Notices...)
	return cfg, nil
}

// decode is n.Decode with yaml.v3's panics (v3.0.1 panics on a merge key
// next to a non-scalar key) turned into errors. Only a runtime error's
// text is kept: yaml.v3's own panics may print a key or value.
func decode(n *yaml.Node, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("yaml: cannot decode")
			if re, ok := r.(runtime.Error); ok {
				err = fmt.Errorf("yaml: cannot decode: %w", re)
			}
		}
	}()
	return n.Decode(v)
}

// format is the error of every problem in errs, sorted, one a line; it
// wraps each.
func format(errs []error) error {
	slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	if len(errs) == 1 {
		return fmt.Errorf("invalid config: %w", errs[0])
	}
	args := []any{len(errs)}
	for _, e := range errs {
		args = append(args, e)
	}
	return fmt.Errorf("invalid config: %d problems:"+strings.Repeat("\n  %w", len(errs)), args...)
}

// aliasVisit is an anchored node checked against a type.
type aliasVisit struct {
	n *yaml.Node
	t reflect.Type
}

// keyWalk checks a document against the schema: every value its field
// cannot hold is an error, every key no field takes a Notice, both by
// path. An aliased node is checked once per type (seen), so aliases of
// aliases cannot make the walk explode.
type keyWalk struct {
	errs    []error
	notices []Notice
	seen    map[aliasVisit]bool
	// lines holds the line of every key walked, by path, for the
	// problems found after decoding (see resolve).
	lines map[string]int
}

func (w *keyWalk) check(n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
		if w.seen[aliasVisit{n, t}] {
			return
		}
		w.seen[aliasVisit{n, t}] = true
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		if sh, ok := reflect.New(t).Interface().(shorthandSection); ok {
			// A section one scalar may stand for (nodeDeletion: frozen).
			if decode(n, sh) != nil {
				w.errs = append(w.errs, fmt.Errorf("%s: %s, got %s (line %d)", path, sh.accepts(), describe(n), n.Line))
			}
			return
		}
	}
	if problem, leaf := checkLeaf(n, t); leaf {
		if problem != "" {
			w.errs = append(w.errs, fmt.Errorf("%s: %s (line %d)", path, problem, n.Line))
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!null" {
			w.errs = append(w.errs, fmt.Errorf("%s: want a section of keys, got %s (line %d)", cmp.Or(path, "the config"), describe(n), n.Line))
		}
		return
	}
	// A merge key (<<) brings in the keys of a mapping or a list of them.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.AliasNode {
			// Its value would be a name (of a vCenter, in logs and
			// errors) or a key: a password's anchor would make either
			// show the password.
			w.errs = append(w.errs, fmt.Errorf("%s: a key may not be an alias (*…): write the key itself (line %d)", cmp.Or(path, "the config"), k.Line))
		}
		if isMerge(n.Content[i]) {
			if v := n.Content[i+1]; v.Kind == yaml.SequenceNode {
				for _, m := range v.Content {
					w.check(m, t, path)
				}
			} else {
				w.check(v, t, path)
			}
		}
	}
	// Then its own keys: a map's each of its element type, a struct's
	// each of its field's.
	var fields map[string]reflect.Type
	if t.Kind() == reflect.Struct {
		fields = yamlFields(t)
	}
	for i := 0; i+1 < len(n.Content) && (fields != nil || t.Kind() == reflect.Map); i += 2 {
		k := n.Content[i]
		if isMerge(k) || k.Kind == yaml.AliasNode {
			continue
		}
		ft, ok := fields[k.Value]
		if fields == nil {
			ft, ok = t.Elem(), true
		}
		if !ok {
			w.notices = append(w.notices, unknownKey(path, k.Value, fields, k.Line))
			continue
		}
		w.lines[join(path, k.Value)] = k.Line
		w.check(n.Content[i+1], ft, join(path, k.Value))
	}
}

// checkLeaf reports whether t is a leaf type (a value, not a section) and,
// if n cannot be decoded into it, what is wrong.
func checkLeaf(n *yaml.Node, t reflect.Type) (problem string, leaf bool) {
	var want string
	whole := false // a number's field that takes whole numbers only
	switch t.Kind() {
	case reflect.Bool:
		want = "want true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		want, whole = "want a whole number", true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want, whole = "want a whole number, 0 or more", true
	case reflect.Float32, reflect.Float64:
		want = "want a number"
	case reflect.String:
		want = "want a single value"
	case reflect.Slice:
		want = "want a list or a comma-separated string"
	default:
		return "", false
	}
	if decode(n, reflect.New(t).Interface()) == nil {
		return "", true
	}
	got := describe(n)
	if got == "a number" && whole {
		// A number that does not fit a whole number's field.
		switch {
		case n.ShortTag() == "!!float":
			got = "a number that is not whole"
		case strings.HasPrefix(n.Value, "-"):
			got = "a negative number"
		default:
			got = "a number too large"
		}
	}
	return want + ", got " + got, true
}

// describe says what kind of value n is. It never quotes a value: any
// may be a password that an alias, a merge key or a misplaced line put
// where it does not belong, and the error reaches logs and Events.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "nothing"
		case "!!str":
			return "a string"
		case "!!timestamp":
			return "a date"
		case "!!binary":
			return "binary data"
		}
		return "a tagged value"
	}
	return "an alias"
}

// shown is key as an error may print it: not when it may carry a
// password, as a line such as "password:S3cr3t" (no space) is one scalar
// to YAML, and "password S3cr3t" one key. Errors name its place, never
// quote it.
func shown(key string) string {
	switch key {
	case "password", "secretName", "secretNamespace", "secretsDirectory":
		return key // a key name of the schema itself (no value in it)
	}
	for _, word := range [...]string{"password", "passwd", "secret", "token"} {
		if strings.Contains(strings.ToLower(key), word) {
			return "<a key that may hold a password>"
		}
	}
	return key
}

// backticked is how yaml.v3 quotes a value in a message, one per line;
// greedy, since the value may itself hold a backtick.
var backticked = regexp.MustCompile("`.*`")

// anchorName is how yaml.v3 names an anchor; an unquoted password that
// starts with * or & is one to YAML.
var anchorName = regexp.MustCompile(`anchor '(.*)'`)

// scrub removes the values and anchor names yaml.v3 quotes in an error (a
// password among them); the line it names stays. data is the document, to
// find the line of an unknown alias, which yaml.v3 does not give.
func scrub(err error, data []byte) error {
	msg := err.Error()
	if m := anchorName.FindStringSubmatch(msg); m != nil {
		where := ""
		for i, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "*"+m[1]) {
				where = fmt.Sprintf("line %d: ", i+1)
				break
			}
		}
		msg = strings.Replace(msg, m[0], "anchor (name not shown)", 1)
		msg = strings.Replace(msg, "yaml: ", "yaml: "+where, 1) +
			" (an unquoted value that starts with * or & is an alias or anchor: quote it)"
	}
	msg = backticked.ReplaceAllString(msg, "(value not shown)")
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// isMerge reports whether k is the merge key <<.
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
}

// yamlFields maps the YAML names of t's fields, inline ones flattened, to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" {
			maps.Copy(out, yamlFields(f.Type))
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// resolve applies inheritance and defaults and validates the result. Each
// problem names its key by path, with the line of that key (lines holds
// them by path) or, for a key that is absent ("vcenter.a.server:
// required"), of its nearest section.
func (f *fileSchema) resolve(lines map[string]int) (*Config, []error) {
	var errs []error
	add := func(path, msg string, args ...any) {
		err := fmt.Errorf("%s: %s", path, fmt.Sprintf(msg, args...))
		for p := path; p != ""; p = p[:max(strings.LastIndexByte(p, '.'), 0)] {
			if line, known := lines[p]; known {
				err = fmt.Errorf("%w (line %d)", err, line)
				break
			}
		}
		errs = append(errs, err)
	}
	cfg := &Config{SecretsDirectory: cmp.Or(f.Global.SecretsDirectory, f.defaultSecretsDirectory), Labels: f.Labels.Labels}
	vcs := f.sections()
	if len(vcs) == 0 {
		add("vcenter", "at least one vCenter is required (or global.server)")
	}
	g := f.Global.vcenterSection
	cfg.RetiredRetention = parseDuration(f.Global.RetiredVCenterRetention, DefaultRetiredRetention, "global.retiredVCenterRetention", add)
	// What every vCenter inherits: global's values, and labels' host groups.
	defaults := inherit(&g, VCenter{NodeDeletion: NodeDeletion{MinAbsence: DefaultMinAbsence}}, "global", add)
	defaults.ZoneHostGroups = resolveHostGroups(&f.Labels.hostGroupsSection, "labels", add)
	if g.Labels != nil {
		add("global.labels", "labels is a section of its own: write labels.zoneHostGroups at the top level (every vCenter) or in a vcenter section")
	}

	// Several entries may name one server (CPI's tenants): each is its
	// own target, with its own credentials and datacenters.
	logins := map[sharedLogin]string{}
	for _, name := range slices.Sorted(maps.Keys(vcs)) {
		vc := f.resolveVCenter(name, cmp.Or(vcs[name], &vcenterSection{}), defaults, cfg, add) // nil: a section of no keys
		if vc.Server == "" {
			add("vcenter."+name+".server", "required")
		} else if key, ok := sharedLoginOf(vc, cfg); ok {
			if first, seen := logins[key]; seen {
				cfg.Notices = append(cfg.Notices, Notice{Kind: NoticeDiffers, Path: "vcenter." + name,
					Reason: "logs in as vcenter." + first + " does: both read the key <server>.username of the same " + key.source +
						" (credentials are per server, CPI's rule); give it its own secretName and secretNamespace, or user and password, for a login of its own"})
			} else {
				logins[key] = name
			}
		}
		cfg.VCenters = append(cfg.VCenters, vc)
	}

	if f.Labels.Zone != "" && f.Labels.Region == "" || f.Labels.Zone == "" && f.Labels.Region != "" && !slices.ContainsFunc(cfg.VCenters, func(vc VCenter) bool { return vc.ZoneHostGroups != nil }) {
		// With host groups a region category alone is the normal case:
		// the zone is the group's.
		cfg.Notices = append(cfg.Notices, Notice{Kind: NoticeDiffers, Path: "labels",
			Reason: "zone and region are used only together (CPI's rule): no zone or region label is set"})
	}
	n := f.Nodes
	cfg.Nodes = AddressRules{
		InternalSubnets:        parseCIDRs(n.InternalNetworkSubnetCIDR, "nodes.internalNetworkSubnetCidr", add),
		ExternalSubnets:        parseCIDRs(n.ExternalNetworkSubnetCIDR, "nodes.externalNetworkSubnetCidr", add),
		ExcludeInternalSubnets: parseCIDRs(n.ExcludeInternalNetworkSubnetCIDR, "nodes.excludeInternalNetworkSubnetCidr", add),
		ExcludeExternalSubnets: parseCIDRs(n.ExcludeExternalNetworkSubnetCIDR, "nodes.excludeExternalNetworkSubnetCidr", add),
		InternalNetworkName:    strings.TrimSpace(n.InternalVMNetworkName),
		ExternalNetworkName:    strings.TrimSpace(n.ExternalVMNetworkName),
	}
	cfg.ReconcileTopology = derefOr(n.ReconcileTopology, false)
	cfg.PlacementLabels = resolvePlacementLabels(n.PlacementLabels, add)
	cfg.TagLabels = resolveTagLabels(n.TagLabels, add)
	return cfg, errs
}

// sharedLogin is where an entry's login comes from when it is read by
// server (a Secret's or the secrets directory's <server>.username): two
// entries of one server with the same one log in as one user.
type sharedLogin struct {
	server string // host lowercased, and port
	source string // "Secret", "secrets directory": a Notice says it
	ref    string // which one: never in a Notice, which quotes no value
}

// sharedLoginOf is vc's sharedLogin; ok is false when its login is its own
// (user and password in its section, tried first, or inline ones).
func sharedLoginOf(vc VCenter, cfg *Config) (sharedLogin, bool) {
	if vc.User != "" {
		return sharedLogin{}, false
	}
	key := sharedLogin{server: strings.ToLower(strings.Trim(vc.Server, "[]")) + ":" + strconv.Itoa(vc.Port)}
	switch vc.CredentialsFrom {
	case FromSecret:
		key.source, key.ref = "Secret", vc.SecretNamespace+"/"+vc.SecretName
	case FromDirectory:
		key.source, key.ref = "secrets directory", cfg.SecretsDirectory
	default:
		return sharedLogin{}, false
	}
	return key, true
}

// sections are the vcenter sections, with CPI's global-vCenter form:
// global.server is a vCenter of its own, next to any vcenter sections,
// unless a section already names it.
func (f *fileSchema) sections() map[string]*vcenterSection {
	gs := f.Global.Server
	if gs == "" || f.VCenter[gs] != nil {
		return f.VCenter
	}
	for _, v := range f.VCenter {
		if v != nil && strings.TrimSpace(v.Server) == strings.TrimSpace(gs) {
			return f.VCenter
		}
	}
	vcs := map[string]*vcenterSection{}
	maps.Copy(vcs, f.VCenter)
	// As CPI, it takes global's credentials as its own.
	vcs[gs] = &vcenterSection{Server: gs, User: f.Global.User, Password: f.Global.Password,
		SecretName: f.Global.SecretName, SecretNamespace: f.Global.SecretNamespace}
	return vcs
}

// resolveVCenter resolves section v of vCenter name over global's values
// (defaults: what inherit made of them).
func (f *fileSchema) resolveVCenter(name string, v *vcenterSection, defaults VCenter, cfg *Config, add func(string, string, ...any)) VCenter {
	g := f.Global.vcenterSection
	p := "vcenter." + name
	vc := inherit(v, defaults, p, add)
	vc.Name, vc.Server = name, strings.TrimSpace(v.Server)
	vc.Datacenters = pick(v.Datacenters, g.Datacenters)
	// CPI's rule: either one (a vCenter's false does not override a
	// global true).
	vc.InsecureFlag = derefOr(v.InsecureFlag, false) || derefOr(g.InsecureFlag, false)
	// A caFile is read when connecting (as CPI does): one mounted after
	// the config fails that vCenter's connection, naming the file, and
	// nothing else.
	vc.CAFile = cmp.Or(v.CAFile, g.CAFile)
	vc.Thumbprints = pick(v.Thumbprint, g.Thumbprint)
	vc.IPFamily = pick(v.IPFamily, g.IPFamily)
	vc.RoundTripCount = derefOr(v.SoapRoundtripCount, derefOr(g.SoapRoundtripCount, DefaultRoundTripCount))
	vc.Inventory = derefOr(v.Inventory, derefOr(g.Inventory, true))
	// A value from global is named by global's key.
	keyPath := func(own bool, key string) string {
		if own {
			return p + "." + key
		}
		return "global." + key
	}
	if port := cmp.Or(v.Port, g.Port); port != "" {
		if n, err := strconv.Atoi(port); err == nil && n >= 1 && n <= 65535 {
			vc.Port = n
		} else {
			add(keyPath(v.Port != "", "port"), "must be a number from 1 to 65535")
		}
	}
	for i, raw := range vc.Datacenters {
		if _, err := ParseDatacenter(raw); err != nil {
			add(fmt.Sprintf("%s[%d]", keyPath(len(v.Datacenters) > 0, "datacenters"), i), "%v", err)
		}
	}
	for i, fam := range vc.IPFamily {
		fam = strings.ToLower(fam)
		vc.IPFamily[i] = fam
		if fam != IPv4 && fam != IPv6 {
			add(p+".ipFamily", "%sneither ipv4 nor ipv6", entry(i, len(vc.IPFamily)))
		}
	}
	if v.InsecureFlag != nil && !*v.InsecureFlag && derefOr(g.InsecureFlag, false) {
		cfg.Notices = append(cfg.Notices, Notice{Kind: NoticeDiffers, Path: p + ".insecureFlag",
			Reason: "false here does not override global.insecureFlag: true (CPI's rule: either one); set a thumbprint or caFile to verify this vCenter's certificate"})
	}
	f.resolveCredentials(&vc, v, cfg, add)
	// A vcenter section's host-group keys replace the top level's whole
	// (an empty mapping turns them off); not merged key by key, so what
	// a vCenter reads is written in one place.
	if v.Labels.set() {
		vc.ZoneHostGroups = resolveHostGroups(v.Labels, p+".labels", add)
	}
	return vc.WithDefaults()
}

// resolvePlacementLabels checks nodes.placementLabels: each a known
// label, once.
func resolvePlacementLabels(names []string, add func(string, string, ...any)) []PlacementLabel {
	var out []PlacementLabel
	all := AllPlacementLabels()
	for i, n := range names {
		l := PlacementLabel(n)
		if !slices.Contains(all, l) {
			// The value is not quoted: a misplaced password must not show.
			add("nodes.placementLabels", "%snot a placement label: want any of %s, %s, %s", entry(i, len(names)), all[0], all[1], all[2])
			continue
		}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// inherit is parent (global's values, for a vcenter section) with the
// keys of section v at path that a vCenter inherits from global
// (requestTimeout, breaker, the request budget, nodeDeletion) resolved
// over it; zero where neither sets one (VCenter.WithDefaults fills those).
func inherit(v *vcenterSection, parent VCenter, path string, add func(string, string, ...any)) VCenter {
	out := parent
	out.RequestTimeout = parseDuration(v.RequestTimeout, parent.RequestTimeout, path+".requestTimeout", add)
	if b := v.Breaker; b != nil {
		if n := b.ConsecutiveFailures; n != nil && *n == 0 {
			add(path+".breaker.consecutiveFailures", "must be > 0")
		} else if n != nil {
			out.Breaker.ConsecutiveFailures = *n
		}
		out.Breaker.OpenTimeout = parseDuration(b.OpenTimeout, parent.Breaker.OpenTimeout, path+".breaker.openTimeout", add)
	}
	if r := v.RequestsPerSecond; r != nil {
		// NaN fails every comparison: !(r > 0) refuses it too.
		if !(*r > 0) || math.IsInf(*r, 0) {
			add(path+".requestsPerSecond", "must be a number > 0 (requests a second; 0.5 is one every 2 seconds)")
		} else {
			out.RequestsPerSecond = *r
		}
	}
	if b := v.RequestBurst; b != nil {
		if *b < 1 {
			add(path+".requestBurst", "must be a whole number > 0")
		} else {
			out.RequestBurst = *b
		}
	}
	out.NodeDeletion = resolveNodeDeletion(v.NodeDeletion, parent.NodeDeletion, path+".nodeDeletion", add)
	return out
}

func parseDuration(s string, def time.Duration, path string, add func(string, string, ...any)) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		add(path, "not a duration (like 10s or 1m)")
	case d <= 0:
		add(path, "must be > 0")
	default:
		return d
	}
	return def
}

func parseCIDRs(s, path string, add func(string, string, ...any)) []netip.Prefix {
	var out []netip.Prefix
	parts := splitList(s)
	for i, part := range parts {
		p, err := netip.ParsePrefix(part)
		if err != nil {
			add(path, "%snot a CIDR", entry(i, len(parts)))
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

// entry names the i-th of n entries of a list for an error ("entry 2
// is "), which never quotes it; "" when it is the only one.
func entry(i, n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf("entry %d is ", i+1)
}

func pick(a, b []string) []string {
	if len(a) == 0 {
		a = b
	}
	return append([]string(nil), a...)
}

func derefOr[T any](p *T, def T) T {
	if p != nil {
		return *p
	}
	return def
}
