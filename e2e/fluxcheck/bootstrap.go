package fluxcheck

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/fluxfed/fluxfed/hostlist"
)

// Host is one expanded entry of a [bootstrap] hosts array: a single host name with the keys of
// the entry it came from, a host listed twice merged into its first appearance.
type Host struct {
	// Name is the host name.
	Name string
	// Bind, Connect and Parent are the entry's keys as written, before any substitution; ""
	// when the entry has none.
	Bind, Connect, Parent string
}

// Bootstrap is one broker's view of its instance, read from its broker.toml the way flux-core
// reads it (conf_bootstrap.c for [bootstrap], the overlay's topology plugins for the tree).
// Every broker of an instance computes its own; they only agree if their files do.
type Bootstrap struct {
	// Hosts are the expanded hosts in rank order: Hosts[r] is the host of rank r.
	Hosts []Host
	// Rank is the rank of the broker's own hostname, -1 when it is not in Hosts (the broker
	// then exits).
	Rank int
	// DefaultPort is default_port, -1 when unset or not an integer port.
	DefaultPort int
	// DefaultBind and DefaultConnect are the URI templates of entries without bind or connect.
	DefaultBind, DefaultConnect string
	// CurveCert is the path in curve_cert.
	CurveCert string
	// Topology is [tbon] topo as written; "" means Flux's default for a [bootstrap] instance,
	// custom.
	Topology string
	// Parents holds the parent of every rank (-1 for rank 0); nil when the topology is not one
	// Flux accepts.
	Parents []int
	// Resources holds, when the file has [resource] config entries, what they give every rank
	// (Resources[r] is rank r's); nil without config (R then comes from a file) or when the
	// entries do not cover exactly the hosts.
	Resources []Resources

	index map[string]int
}

// ParseBootstrap reads brokerTOML as the broker whose hostname is hostname reads it at
// startup, and returns its view of the instance with the violations of the rules that concern
// this file alone (see Violation.Fatal for those that stop the broker). The Bootstrap is nil
// when the file cannot be read as far as its hosts.
func ParseBootstrap(brokerTOML []byte, hostname string) (*Bootstrap, []Violation) {
	c := &checker{}
	b := c.bootstrap(brokerTOML, hostname)
	if b.Hosts == nil {
		return nil, c.violations
	}
	return b, c.violations
}

// Size returns the number of brokers of the instance.
func (b *Bootstrap) Size() int { return len(b.Hosts) }

// RankOf returns the rank of host, or -1 when it is not in Hosts.
func (b *Bootstrap) RankOf(host string) int {
	if r, ok := b.index[host]; ok {
		return r
	}
	return -1
}

// Parent returns the parent of rank, or -1 for rank 0, a rank outside Hosts, or an invalid
// topology.
func (b *Bootstrap) Parent(rank int) int {
	if b.Parents == nil || rank <= 0 || rank >= len(b.Parents) {
		return -1
	}
	return b.Parents[rank]
}

// Children returns the children of rank in ascending order: the brokers whose hello rank
// accepts.
func (b *Bootstrap) Children(rank int) []int {
	var children []int
	for r, p := range b.Parents {
		if r > 0 && p == rank {
			children = append(children, r)
		}
	}
	return children
}

// ChildRoute returns the child of rank through which a message from rank reaches target, as
// the overlay routes a request downstream, or -1 when target is not below rank.
func (b *Bootstrap) ChildRoute(rank, target int) int {
	if b.Parents == nil || target <= 0 || target >= len(b.Parents) || rank < 0 {
		return -1
	}
	// The parents form a tree (custom refuses cycles), so the walk up from target ends at
	// rank 0 after at most len(Parents) steps.
	for hop, steps := target, 0; hop > 0 && steps < len(b.Parents); steps++ {
		if b.Parents[hop] == rank {
			return hop
		}
		hop = b.Parents[hop]
	}
	return -1
}

// BindURI returns the URI the broker of rank binds when it has children: its entry's bind, or
// default_bind, with %h and %p substituted; "" when neither is set.
func (b *Bootstrap) BindURI(rank int) string {
	if rank < 0 || rank >= len(b.Hosts) {
		return ""
	}
	h := b.Hosts[rank]
	return b.uri(h.Bind, b.DefaultBind, h.Name)
}

// ConnectURI returns the URI the children of rank connect to: its entry's connect, or
// default_connect, with %h and %p substituted; "" when neither is set.
func (b *Bootstrap) ConnectURI(rank int) string {
	if rank < 0 || rank >= len(b.Hosts) {
		return ""
	}
	h := b.Hosts[rank]
	return b.uri(h.Connect, b.DefaultConnect, h.Name)
}

func (b *Bootstrap) uri(own, def, host string) string {
	tmpl := firstNonEmpty(own, def)
	if tmpl == "" {
		return ""
	}
	return FormatURI(tmpl, host, b.DefaultPort)
}

func (b *Bootstrap) name(rank int) string {
	if rank >= 0 && rank < len(b.Hosts) {
		return b.Hosts[rank].Name
	}
	return "?"
}

// FormatURI substitutes a URI template in one pass as flux-core's conf_bootstrap.c does: %h
// becomes host, %p port (an unset default_port, -1, is printed as is), %% a single %; any
// other % sequence, and a trailing %, stay as written.
func FormatURI(tmpl, host string, port int) string {
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '%' || i+1 == len(tmpl) {
			b.WriteByte(tmpl[i])
			continue
		}
		i++
		switch tmpl[i] {
		case 'h':
			b.WriteString(host)
		case 'p':
			b.WriteString(strconv.Itoa(port))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(tmpl[i])
		}
	}
	return b.String()
}

// bootstrapKeys are the keys flux-core's conf_bootstrap.c accepts in [bootstrap].
var bootstrapKeys = map[string]bool{
	"enable_ipv6": true, "curve_cert": true, "default_port": true,
	"default_bind": true, "default_connect": true, "hosts": true,
}

// bootstrap reads one configuration and checks the rules that concern it alone. Hosts is nil
// when the configuration could not be read far enough.
func (c *checker) bootstrap(data []byte, host string) *Bootstrap {
	b := &Bootstrap{Rank: -1, DefaultPort: -1}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		c.add(host, RuleTOML, "%v", err)
		return b
	}
	boot, ok := doc["bootstrap"].(map[string]any)
	if !ok {
		c.add(host, RuleBootstrapKeys, "there is no [bootstrap] table, so the broker does not boot from the configuration")
		return b
	}
	for _, k := range sortedKeys(boot) {
		if !bootstrapKeys[k] {
			c.add(host, RuleBootstrapKeys, "unknown key %s", k)
		}
	}
	for _, kv := range []struct {
		key string
		dst *string
	}{{"curve_cert", &b.CurveCert}, {"default_bind", &b.DefaultBind}, {"default_connect", &b.DefaultConnect}} {
		key, dst := kv.key, kv.dst
		if v, present := boot[key]; present {
			str, isStr := v.(string)
			if !isStr {
				c.add(host, RuleBootstrapKeys, "%s must be a string, not %T", key, v)
			}
			*dst = str
		}
	}
	if v, present := boot["enable_ipv6"]; present {
		if _, isBool := v.(bool); !isBool {
			c.add(host, RuleBootstrapKeys, "enable_ipv6 must be a boolean, not %T", v)
		}
	}
	if v, present := boot["default_port"]; present {
		switch p := v.(type) {
		case int64:
			if p < 0 || p > 65535 {
				c.add(host, RuleDefaultPort, "default_port %d is out of the range 0-65535", p)
			} else {
				b.DefaultPort = int(p)
			}
		default:
			c.add(host, RuleDefaultPort, "default_port is %T %v; Flux refuses anything but an integer (a quoted number too)", v, v)
		}
	}
	b.Hosts, b.index = c.hosts(host, boot["hosts"])
	if b.Hosts == nil {
		return b
	}
	if r, found := b.index[host]; found {
		b.Rank = r
	} else {
		c.add(host, RuleOwnHost, "%s not found in hosts, so the broker exits", host)
	}
	if len(b.Hosts) > 1 && b.CurveCert == "" {
		c.add(host, RuleCurveCert, "%d hosts and no curve_cert", len(b.Hosts))
	}
	c.uris(host, b)
	b.Parents = c.topology(host, b, doc["tbon"])
	c.bindConnect(host, b)
	b.Resources = c.resources(host, b, doc["resource"])
	return b
}

// hosts expands the hosts array as conf_bootstrap.c does: every host value is an RFC 29
// hostlist; a host that appears again is merged into its first appearance, which keeps its
// rank and takes the keys it lacks from the later entry.
func (c *checker) hosts(host string, v any) ([]Host, map[string]int) {
	if v == nil {
		// A missing hosts array makes a singleton instance of the local host.
		return []Host{{Name: host}}, map[string]int{host: 0}
	}
	arr, ok := v.([]any)
	if !ok {
		c.add(host, RuleHostsKeys, "hosts must be an array, not %T", v)
		return nil, nil
	}
	if len(arr) == 0 {
		return []Host{{Name: host}}, map[string]int{host: 0}
	}
	var entries []Host
	index := map[string]int{}
	for i, item := range arr {
		table, ok := item.(map[string]any)
		if !ok {
			c.add(host, RuleHostsKeys, "hosts[%d] must be a table, not %T", i, item)
			return nil, nil
		}
		var e Host
		fields := map[string]*string{"host": &e.Name, "bind": &e.Bind, "connect": &e.Connect, "parent": &e.Parent}
		for _, k := range sortedKeys(table) {
			dst, known := fields[k]
			if !known {
				c.add(host, RuleHostsKeys, "hosts[%d] has the unknown key %s", i, k)
				continue
			}
			str, isStr := table[k].(string)
			if !isStr {
				c.add(host, RuleHostsKeys, "hosts[%d].%s must be a string, not %T", i, k, table[k])
			}
			*dst = str
		}
		if e.Name == "" {
			c.add(host, RuleHostsKeys, "hosts[%d] has no host", i)
			return nil, nil
		}
		names, err := hostlist.Expand(e.Name)
		if err != nil {
			c.add(host, RuleHostname, "hosts[%d].host %q is not an RFC 29 hostlist: %v", i, e.Name, err)
			return nil, nil
		}
		for _, name := range names {
			if reason := hostReason(name); reason != "" {
				c.add(host, RuleHostname, "hosts[%d]: %q %s", i, name, reason)
			}
			if r, seen := index[name]; seen {
				prev := &entries[r]
				prev.Bind = firstNonEmpty(prev.Bind, e.Bind)
				prev.Connect = firstNonEmpty(prev.Connect, e.Connect)
				prev.Parent = firstNonEmpty(prev.Parent, e.Parent)
				continue
			}
			index[name] = len(entries)
			entries = append(entries, Host{Name: name, Bind: e.Bind, Connect: e.Connect, Parent: e.Parent})
		}
	}
	return entries, index
}

// hostReason returns why Flux would refuse name as a host, or "": a domain name of 1-253
// characters, labels of 1-63 characters of [A-Za-z0-9-] not starting or ending with '-'.
func hostReason(name string) string {
	if name == "" || len(name) > 253 {
		return "must be 1-253 characters"
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "has a label that is empty or longer than 63 characters"
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "has a label that starts or ends with '-'"
		}
		for _, ch := range label {
			letterOrDigit := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
			if !letterOrDigit && ch != '-' {
				return fmt.Sprintf("contains %q", ch)
			}
		}
	}
	return ""
}

// uris checks every URI template of the configuration after %h and %p substitution.
func (c *checker) uris(host string, b *Bootstrap) {
	check := func(what, tmpl, h string) {
		if tmpl == "" {
			return
		}
		reason, fatal := uriReason(FormatURI(tmpl, h, b.DefaultPort))
		switch {
		case reason == "":
		case fatal:
			c.add(host, RuleURI, "%s %q: %s", what, tmpl, reason)
		default:
			c.advise(host, RuleURI, "%s %q: %s", what, tmpl, reason)
		}
	}
	check("default_bind", b.DefaultBind, "host")
	check("default_connect", b.DefaultConnect, "host")
	for _, e := range b.Hosts {
		check("bind of "+e.Name, e.Bind, e.Name)
		check("connect of "+e.Name, e.Connect, e.Name)
	}
}

// uriReason returns why uri is not a usable ZeroMQ endpoint, or "", and whether flux-core
// already refuses it at startup: it checks the scheme, the 0MQ wildcard and that there is an
// address, but not the port, which fails later, at bind or connect.
func uriReason(uri string) (reason string, fatal bool) {
	switch {
	case strings.HasPrefix(uri, "ipc://"):
		path := strings.TrimPrefix(uri, "ipc://")
		if path == "" || len(path) > 108 {
			return "the socket path must be 1-108 bytes", true
		}
		return "", false
	case !strings.HasPrefix(uri, "tcp://"):
		return "the scheme is not tcp:// or ipc://", true
	}
	addr := strings.TrimPrefix(uri, "tcp://")
	if strings.Contains(uri, ":*") {
		return "the port is the 0MQ wildcard", true
	}
	i := strings.LastIndexByte(addr, ':')
	if i <= 0 {
		return "there is no host:port", addr == ""
	}
	port := addr[i+1:]
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || port[0] == '+' || port[0] == '-' {
		return fmt.Sprintf("the port %q is not a number in 1-65535", port), false
	}
	return "", false
}

// topology computes every rank's parent as the overlay's topology plugins do, or returns nil.
func (c *checker) topology(host string, b *Bootstrap, tbon any) []int {
	topo := "custom"
	if t, ok := tbon.(map[string]any); ok {
		if v, present := t["topo"]; present {
			str, isStr := v.(string)
			if !isStr {
				c.add(host, RuleTopology, "[tbon] topo must be a string, not %T", v)
				return nil
			}
			topo = str
			b.Topology = str
		}
	}
	n := len(b.Hosts)
	parents := make([]int, n)
	parents[0] = -1
	scheme, arg, _ := strings.Cut(topo, ":")
	number := func() (int, bool) {
		k, err := strconv.Atoi(arg)
		return k, err == nil && k >= 0 && arg[0] != '+'
	}
	switch scheme {
	case "custom":
		return c.custom(host, b, parents)
	case "kary":
		k, ok := number()
		if !ok {
			c.add(host, RuleTopology, "kary needs an integer K >= 0, not %q", arg)
			return nil
		}
		for r := 1; r < n; r++ {
			if k > 0 {
				parents[r] = (r - 1) / k
			}
		}
	case "binomial":
		for r := 1; r < n; r++ {
			parents[r] = r & (r - 1)
		}
	case "mincrit":
		k := 0
		if arg != "" {
			var ok bool
			if k, ok = number(); !ok {
				c.add(host, RuleTopology, "mincrit takes an integer K >= 0, not %q", arg)
				return nil
			}
		} else if n > 1025 {
			// flux-core picks the fewest routers (at least 2) that keep their fanout <= 1024.
			k = 2
			for leaves := n - 1 - k; (leaves+k-1)/k > 1024; leaves = n - 1 - k {
				k++
			}
		}
		for r := k + 1; r < n && k > 0; r++ {
			parents[r] = (r-k-1)%k + 1
		}
	default:
		c.add(host, RuleTopology, "unknown topology %q", topo)
		return nil
	}
	for _, e := range b.Hosts {
		if e.Parent != "" {
			// Not an error for Flux, but the parent keys mean nothing under this topology.
			c.advise(host, RuleTopology, "%s has a parent key, which topology %q ignores", e.Name, topo)
			break
		}
	}
	return parents
}

// custom applies parent keys as the custom topology plugin does.
func (c *checker) custom(host string, b *Bootstrap, parents []int) []int {
	for r, e := range b.Hosts {
		if e.Parent == "" {
			continue
		}
		p, found := b.index[e.Parent]
		switch {
		case r == 0:
			c.add(host, RuleTopology, "rank 0 (%s) may not have a parent", e.Name)
			return nil
		case !found:
			c.add(host, RuleTopology, "the parent %q of %s is not in hosts", e.Parent, e.Name)
			return nil
		case p == r:
			c.add(host, RuleTopology, "%s is its own parent", e.Name)
			return nil
		}
		parents[r] = p
	}
	for r := range parents {
		seen := map[int]bool{}
		for p := r; p > 0; p = parents[p] {
			if seen[p] {
				c.add(host, RuleTopology, "the parent keys make a cycle through %s", b.name(r))
				return nil
			}
			seen[p] = true
		}
	}
	return parents
}

// bindConnect checks that this broker can bind if it has children and connect to its parent.
func (c *checker) bindConnect(host string, b *Bootstrap) {
	if b.Parents == nil || b.Rank < 0 {
		return
	}
	if children := b.Children(b.Rank); len(children) > 0 && b.BindURI(b.Rank) == "" {
		c.add(host, RuleBindConnect, "rank %d has children (rank %d) but no bind URI", b.Rank, children[0])
	}
	if b.Rank > 0 {
		p := b.Parents[b.Rank]
		if b.ConnectURI(p) == "" {
			c.add(host, RuleBindConnect, "the parent %s (rank %d) has no connect URI", b.name(p), p)
		}
	}
}
