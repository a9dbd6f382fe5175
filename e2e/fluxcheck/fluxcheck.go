// Package fluxcheck checks the broker configurations of a Flux instance against the rules a
// Flux broker applies (shared/FLUX.md), for tests: given the broker.toml and CURVE certificate
// of every broker pod, and the cluster each pod runs in, it reports every place where a real
// broker would refuse to start, take another rank than its peers think, or wait forever for a
// parent it cannot reach. It is written from flux-core's rules, independently of the renderers
// it checks, and is imported by tests only.
package fluxcheck

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/fluxfed/fluxfed/hostlist"
	"github.com/fluxfed/fluxfed/member/render/curve"
)

// HostConfig is what one broker pod starts with.
type HostConfig struct {
	// Hostname is the pod's hostname, which the broker looks up in the hosts array.
	Hostname string
	// BrokerTOML is the broker's configuration file.
	BrokerTOML []byte
	// CurveCert is the certificate file curve_cert points to.
	CurveCert []byte
	// Cluster names the cluster the pod runs in: brokers of one cluster reach each other, and
	// other clusters only reach rank 0 through the address it is exposed at.
	Cluster string
}

// Rule names a rule of FLUX.md that a configuration can break.
type Rule string

// The rules Check applies.
const (
	RuleTOML          Rule = "broker.toml must be TOML"
	RuleBootstrapKeys Rule = "[bootstrap] holds only enable_ipv6, curve_cert, default_port, default_bind, default_connect and hosts"
	RuleHostsKeys     Rule = "a hosts entry holds host and only bind, connect and parent"
	RuleDefaultPort   Rule = "default_port must be an integer port"
	RuleURI           Rule = "URIs must be tcp:// or ipc:// with a numeric port"
	RuleCurveCert     Rule = "curve_cert is required when size > 1"
	RuleHostname      Rule = "every host must be a DNS name or an IPv4 address"
	RuleOwnHost       Rule = "the broker's hostname must be in hosts"
	RuleUniqueBroker  Rule = "every broker has its own hostname"
	RuleRankZero      Rule = "the instance needs a rank 0"
	RuleSameHosts     Rule = "every side lists the same hosts at the same ranks"
	RuleTopology      Rule = "the topology must be one Flux accepts"
	RuleSameParents   Rule = "every side computes the same parent for every rank"
	RuleBindConnect   Rule = "a broker with children needs a bind URI, its children the parent's connect URI"
	RuleReachable     Rule = "a broker's parent is rank 0 (reached across clusters through its exposed address) or a broker of its own cluster"
	RuleCertificate   Rule = "every broker has the same valid certificate"
)

// Violation is one broken rule, on one broker.
type Violation struct {
	// Host is the broker whose configuration breaks the rule; "" for the instance as a whole.
	Host string
	Rule Rule
	// Detail says what exactly is wrong.
	Detail string
}

// Error returns "<host>: <rule>: <detail>".
func (v Violation) Error() string {
	host := v.Host
	if host == "" {
		host = "instance"
	}
	return host + ": " + string(v.Rule) + ": " + v.Detail
}

// Check returns every violation of Violations joined into one error, or nil.
func Check(configs []HostConfig) error {
	var errs []error
	for _, v := range Violations(configs) {
		errs = append(errs, v)
	}
	return errors.Join(errs...)
}

// Violations checks every configuration on its own and then all of them together: the same
// hosts and parents on every side, every parent reachable, one certificate.
func Violations(configs []HostConfig) []Violation {
	c := &checker{}
	sides := make([]*side, len(configs))
	byHost := map[string]*side{}
	for i := range configs {
		s := c.parse(&configs[i])
		sides[i] = s
		if other, dup := byHost[configs[i].Hostname]; dup {
			c.add(configs[i].Hostname, RuleUniqueBroker, "two brokers are named %s (clusters %s and %s)", configs[i].Hostname, other.cfg.Cluster, configs[i].Cluster)
			continue
		}
		byHost[configs[i].Hostname] = s
	}
	var root *side
	for _, s := range sides {
		if s.rank == 0 {
			root = s
			break
		}
	}
	if root == nil {
		if len(configs) > 0 {
			c.add("", RuleRankZero, "no broker finds itself at rank 0, so nothing can start")
		}
	} else {
		for _, s := range sides {
			if s != root && s.hosts != nil {
				c.compare(root, s)
			}
			c.reachable(root, s, byHost)
		}
	}
	c.certificates(configs)
	return c.violations
}

type checker struct {
	violations []Violation
}

func (c *checker) add(host string, rule Rule, format string, args ...any) {
	c.violations = append(c.violations, Violation{Host: host, Rule: rule, Detail: fmt.Sprintf(format, args...)})
}

// entry is one expanded host of a hosts array, its keys merged as Flux merges duplicates.
type entry struct {
	host, bind, connect, parent string
}

// side is one broker's view of the instance.
type side struct {
	cfg   *HostConfig
	hosts []entry // nil when the configuration could not be read far enough
	index map[string]int
	// rank is the broker's own rank, -1 when it is not in hosts.
	rank        int
	defaultPort int
	defBind     string
	defConnect  string
	// parents holds every rank's parent (-1 for rank 0); nil when the topology is not valid.
	parents []int
}

func (s *side) name(rank int) string {
	if rank >= 0 && rank < len(s.hosts) {
		return s.hosts[rank].host
	}
	return "?"
}

// bootstrapKeys are the keys flux-core's conf_bootstrap.c accepts in [bootstrap].
var bootstrapKeys = map[string]bool{
	"enable_ipv6": true, "curve_cert": true, "default_port": true,
	"default_bind": true, "default_connect": true, "hosts": true,
}

// parse reads one configuration and checks the rules that concern it alone.
func (c *checker) parse(cfg *HostConfig) *side {
	s := &side{cfg: cfg, rank: -1, defaultPort: -1}
	host := cfg.Hostname
	var doc map[string]any
	if err := toml.Unmarshal(cfg.BrokerTOML, &doc); err != nil {
		c.add(host, RuleTOML, "%v", err)
		return s
	}
	boot, ok := doc["bootstrap"].(map[string]any)
	if !ok {
		c.add(host, RuleBootstrapKeys, "there is no [bootstrap] table, so the broker does not boot from the configuration")
		return s
	}
	for _, k := range sortedKeys(boot) {
		if !bootstrapKeys[k] {
			c.add(host, RuleBootstrapKeys, "unknown key %s", k)
		}
	}
	var curveCert string
	for _, kv := range []struct {
		key string
		dst *string
	}{{"curve_cert", &curveCert}, {"default_bind", &s.defBind}, {"default_connect", &s.defConnect}} {
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
				s.defaultPort = int(p)
			}
		default:
			c.add(host, RuleDefaultPort, "default_port is %T %v; Flux refuses anything but an integer (a quoted number too)", v, v)
		}
	}
	s.hosts, s.index = c.hosts(host, boot["hosts"])
	if s.hosts == nil {
		return s
	}
	if r, found := s.index[host]; found {
		s.rank = r
	} else {
		c.add(host, RuleOwnHost, "%s not found in hosts, so the broker exits", host)
	}
	if len(s.hosts) > 1 && curveCert == "" {
		c.add(host, RuleCurveCert, "%d hosts and no curve_cert", len(s.hosts))
	}
	c.uris(s)
	s.parents = c.topology(s, doc["tbon"])
	c.bindConnect(s)
	return s
}

// hosts expands the hosts array as conf_bootstrap.c does: every host value is an RFC 29
// hostlist; a host that appears again is merged into its first appearance, which keeps its
// rank and takes the keys it lacks from the later entry.
func (c *checker) hosts(host string, v any) ([]entry, map[string]int) {
	if v == nil {
		// A missing hosts array makes a singleton instance of the local host.
		return []entry{{host: host}}, map[string]int{host: 0}
	}
	arr, ok := v.([]any)
	if !ok {
		c.add(host, RuleHostsKeys, "hosts must be an array, not %T", v)
		return nil, nil
	}
	if len(arr) == 0 {
		return []entry{{host: host}}, map[string]int{host: 0}
	}
	var entries []entry
	index := map[string]int{}
	for i, item := range arr {
		table, ok := item.(map[string]any)
		if !ok {
			c.add(host, RuleHostsKeys, "hosts[%d] must be a table, not %T", i, item)
			return nil, nil
		}
		var e entry
		fields := map[string]*string{"host": &e.host, "bind": &e.bind, "connect": &e.connect, "parent": &e.parent}
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
		if e.host == "" {
			c.add(host, RuleHostsKeys, "hosts[%d] has no host", i)
			return nil, nil
		}
		names, err := hostlist.Expand(e.host)
		if err != nil {
			c.add(host, RuleHostname, "hosts[%d].host %q is not an RFC 29 hostlist: %v", i, e.host, err)
			return nil, nil
		}
		for _, name := range names {
			if reason := hostReason(name); reason != "" {
				c.add(host, RuleHostname, "hosts[%d]: %q %s", i, name, reason)
			}
			if r, seen := index[name]; seen {
				prev := &entries[r]
				prev.bind = firstNonEmpty(prev.bind, e.bind)
				prev.connect = firstNonEmpty(prev.connect, e.connect)
				prev.parent = firstNonEmpty(prev.parent, e.parent)
				continue
			}
			index[name] = len(entries)
			entries = append(entries, entry{host: name, bind: e.bind, connect: e.connect, parent: e.parent})
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
func (c *checker) uris(s *side) {
	host := s.cfg.Hostname
	check := func(what, tmpl, h string) {
		if tmpl == "" {
			return
		}
		if reason := uriReason(format(tmpl, h, s.defaultPort)); reason != "" {
			c.add(host, RuleURI, "%s %q: %s", what, tmpl, reason)
		}
	}
	check("default_bind", s.defBind, "host")
	check("default_connect", s.defConnect, "host")
	for _, e := range s.hosts {
		check("bind of "+e.host, e.bind, e.host)
		check("connect of "+e.host, e.connect, e.host)
	}
}

// format substitutes %h and %p as conf_bootstrap.c does; an unset default_port gives -1.
func format(tmpl, host string, port int) string {
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

// uriReason returns why uri is not a usable ZeroMQ endpoint, or "".
func uriReason(uri string) string {
	switch {
	case strings.HasPrefix(uri, "ipc://"):
		path := strings.TrimPrefix(uri, "ipc://")
		if path == "" || len(path) > 108 {
			return "the socket path must be 1-108 bytes"
		}
		return ""
	case !strings.HasPrefix(uri, "tcp://"):
		return "the scheme is not tcp:// or ipc://"
	}
	addr := strings.TrimPrefix(uri, "tcp://")
	i := strings.LastIndexByte(addr, ':')
	if i <= 0 {
		return "there is no host:port"
	}
	port := addr[i+1:]
	if port == "*" {
		return "the port is the 0MQ wildcard"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || port[0] == '+' || port[0] == '-' {
		return fmt.Sprintf("the port %q is not a number in 1-65535", port)
	}
	return ""
}

// topology computes every rank's parent as the overlay's topology plugins do, or returns nil.
func (c *checker) topology(s *side, tbon any) []int {
	host := s.cfg.Hostname
	topo := "custom"
	if t, ok := tbon.(map[string]any); ok {
		if v, present := t["topo"]; present {
			str, isStr := v.(string)
			if !isStr {
				c.add(host, RuleTopology, "[tbon] topo must be a string, not %T", v)
				return nil
			}
			topo = str
		}
	}
	n := len(s.hosts)
	parents := make([]int, n)
	parents[0] = -1
	scheme, arg, _ := strings.Cut(topo, ":")
	number := func() (int, bool) {
		k, err := strconv.Atoi(arg)
		return k, err == nil && k >= 0 && arg[0] != '+'
	}
	switch scheme {
	case "custom":
		return c.custom(s, parents)
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
	for _, e := range s.hosts {
		if e.parent != "" {
			// Not an error for Flux, but the parent keys mean nothing under this topology.
			c.add(host, RuleTopology, "%s has a parent key, which topology %q ignores", e.host, topo)
			break
		}
	}
	return parents
}

// custom applies parent keys as the custom topology plugin does.
func (c *checker) custom(s *side, parents []int) []int {
	host := s.cfg.Hostname
	for r, e := range s.hosts {
		if e.parent == "" {
			continue
		}
		p, found := s.index[e.parent]
		switch {
		case r == 0:
			c.add(host, RuleTopology, "rank 0 (%s) may not have a parent", e.host)
			return nil
		case !found:
			c.add(host, RuleTopology, "the parent %q of %s is not in hosts", e.parent, e.host)
			return nil
		case p == r:
			c.add(host, RuleTopology, "%s is its own parent", e.host)
			return nil
		}
		parents[r] = p
	}
	for r := range parents {
		seen := map[int]bool{}
		for p := r; p > 0; p = parents[p] {
			if seen[p] {
				c.add(host, RuleTopology, "the parent keys make a cycle through %s", s.name(r))
				return nil
			}
			seen[p] = true
		}
	}
	return parents
}

// bindConnect checks that this broker can bind if it has children and connect to its parent.
func (c *checker) bindConnect(s *side) {
	if s.parents == nil || s.rank < 0 {
		return
	}
	host := s.cfg.Hostname
	for r, p := range s.parents {
		if p == s.rank {
			if firstNonEmpty(s.hosts[s.rank].bind, s.defBind) == "" {
				c.add(host, RuleBindConnect, "rank %d has children (rank %d) but no bind URI", s.rank, r)
			}
			break
		}
	}
	if s.rank > 0 {
		p := s.parents[s.rank]
		if firstNonEmpty(s.hosts[p].connect, s.defConnect) == "" {
			c.add(host, RuleBindConnect, "the parent %s (rank %d) has no connect URI", s.name(p), p)
		}
	}
}

// compare checks s against the root side: the same hosts at the same ranks (but rank 0, which
// a burst side names by the lead broker's address), and the same parents.
func (c *checker) compare(root, s *side) {
	host := s.cfg.Hostname
	if len(s.hosts) != len(root.hosts) {
		c.add(host, RuleSameHosts, "%d hosts here, %d on the root side (%s)", len(s.hosts), len(root.hosts), root.cfg.Hostname)
	}
	for r := 1; r < len(s.hosts) && r < len(root.hosts); r++ {
		if s.hosts[r].host != root.hosts[r].host {
			c.add(host, RuleSameHosts, "rank %d is %s here but %s on the root side (%s)", r, s.hosts[r].host, root.hosts[r].host, root.cfg.Hostname)
			break
		}
	}
	if s.parents == nil || root.parents == nil {
		return
	}
	var differ []string
	for r := 1; r < len(s.parents) && r < len(root.parents); r++ {
		if s.parents[r] != root.parents[r] {
			differ = append(differ, fmt.Sprintf("rank %d (%s) has parent %d here but %d on the root side", r, s.name(r), s.parents[r], root.parents[r]))
		}
	}
	if len(differ) > 0 {
		more := ""
		if len(differ) > 3 {
			more = fmt.Sprintf(" and %d more", len(differ)-3)
			differ = differ[:3]
		}
		c.add(host, RuleSameParents, "%s%s; rank 0 and its peers then disagree on who serves whom", strings.Join(differ, "; "), more)
	}
}

// reachable checks that the broker of s can reach its parent.
func (c *checker) reachable(root, s *side, byHost map[string]*side) {
	if s.parents == nil || s.rank <= 0 {
		return
	}
	host := s.cfg.Hostname
	p := s.parents[s.rank]
	if p == 0 {
		if s.cfg.Cluster == root.cfg.Cluster {
			return
		}
		// From another cluster rank 0 is reached through the address it is exposed at; a pod
		// hostname or a Service DNS name of the root's cluster does not resolve there.
		uri := format(firstNonEmpty(s.hosts[0].connect, s.defConnect), s.hosts[0].host, s.defaultPort)
		addr := strings.TrimPrefix(uri, "tcp://")
		if i := strings.LastIndexByte(addr, ':'); i > 0 {
			addr = addr[:i]
		}
		if _, rootPod := root.index[addr]; rootPod || !strings.Contains(addr, ".") || strings.HasSuffix(addr, ".svc") || strings.HasSuffix(addr, ".cluster.local") {
			c.add(host, RuleReachable, "rank 0 runs in cluster %s and this broker in %s, but it connects to rank 0 at %q, a name of rank 0's cluster, instead of the address rank 0 is exposed at",
				root.cfg.Cluster, s.cfg.Cluster, uri)
		}
		return
	}
	parent := s.name(p)
	ps, found := byHost[parent]
	switch {
	case !found:
		c.add(host, RuleReachable, "the parent %s (rank %d) is not among the brokers, so rank %d waits for it", parent, p, s.rank)
	case ps.cfg.Cluster != s.cfg.Cluster:
		c.add(host, RuleReachable, "the parent %s (rank %d) runs in cluster %s, this broker in %s, and only rank 0 is reachable across clusters",
			parent, p, ps.cfg.Cluster, s.cfg.Cluster)
	}
}

// certificates checks that every broker has the same certificate and that it is valid.
func (c *checker) certificates(configs []HostConfig) {
	if len(configs) == 0 {
		return
	}
	first := configs[0]
	if _, err := curve.Parse(first.CurveCert); err != nil {
		c.add(first.Hostname, RuleCertificate, "%v", err)
	}
	for _, cfg := range configs[1:] {
		if !bytes.Equal(cfg.CurveCert, first.CurveCert) {
			c.add(cfg.Hostname, RuleCertificate, "the certificate differs from %s's, so the broker never joins", first.Hostname)
		}
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
