// Package fluxcheck checks the broker configurations of a Flux instance against the rules a
// Flux broker applies (shared/FLUX.md), for tests: given the broker.toml and CURVE certificate
// of every broker pod, and the cluster each pod runs in, it reports every place where a real
// broker would refuse to start, take another rank than its peers think, or wait forever for a
// parent it cannot reach. It is written from flux-core's rules, independently of the renderers
// it checks, and is imported by tests only.
//
// ParseBootstrap exposes one broker's reading of its own file (its rank, the tree, its bind and
// connect URIs) for tests that act as brokers, such as e2e/brokersim.
package fluxcheck

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

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
	RuleTOML           Rule = "broker.toml must be TOML"
	RuleBootstrapKeys  Rule = "[bootstrap] holds only enable_ipv6, curve_cert, default_port, default_bind, default_connect and hosts"
	RuleHostsKeys      Rule = "a hosts entry holds host and only bind, connect and parent"
	RuleDefaultPort    Rule = "default_port must be an integer port"
	RuleURI            Rule = "URIs must be tcp:// or ipc:// with a numeric port"
	RuleCurveCert      Rule = "curve_cert is required when size > 1"
	RuleHostname       Rule = "every host must be a DNS name or an IPv4 address"
	RuleOwnHost        Rule = "the broker's hostname must be in hosts"
	RuleUniqueBroker   Rule = "every broker has its own hostname"
	RuleRankZero       Rule = "the instance needs a rank 0"
	RuleSameHosts      Rule = "every side lists the same hosts at the same ranks"
	RuleTopology       Rule = "the topology must be one Flux accepts"
	RuleSameParents    Rule = "every side computes the same parent for every rank"
	RuleBindConnect    Rule = "a broker with children needs a bind URI, its children the parent's connect URI"
	RuleReachable      Rule = "a broker's parent is rank 0 (reached across clusters through its exposed address) or a broker of its own cluster"
	RuleCertificate    Rule = "every broker has the same valid certificate"
	RuleResourceConfig Rule = "[resource] config entries hold hosts and only cores, gpus (idsets) and properties, and give every host cores"
	RuleResourceHosts  Rule = "[resource] config lists exactly the bootstrap hosts"
	RuleSameResources  Rule = "every side describes every rank with the same cores, GPUs and properties"
)

// Violation is one broken rule, on one broker.
type Violation struct {
	// Host is the broker whose configuration breaks the rule; "" for the instance as a whole.
	Host string
	Rule Rule
	// Detail says what exactly is wrong.
	Detail string

	// advisory marks what a broker accepts at startup although it cannot work as written.
	advisory bool
}

// Fatal reports whether a real broker refuses to start on this violation. It is false for
// what flux-core accepts at startup and only fails later or ignores: a URI whose port is not a
// number (the bind or connect fails, quietly), parent keys under a topology other than custom.
// Violations between brokers (the same hosts and parents, a reachable parent, the same
// certificate) are not about startup and are not fatal; a certificate Flux cannot read is.
func (v Violation) Fatal() bool {
	if v.advisory {
		return false
	}
	switch v.Rule {
	case RuleSameHosts, RuleSameParents, RuleReachable, RuleUniqueBroker, RuleRankZero, RuleSameResources:
		return false
	}
	return true
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
// hosts, parents and resources on every side, every parent reachable, one certificate.
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
		if s.Rank == 0 {
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
			if s != root && s.Hosts != nil {
				c.compare(root, s)
				c.compareResources(root, s)
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

// advise adds a violation that does not stop the broker from starting.
func (c *checker) advise(host string, rule Rule, format string, args ...any) {
	c.violations = append(c.violations, Violation{Host: host, Rule: rule, Detail: fmt.Sprintf(format, args...), advisory: true})
}

// side is one broker's view of the instance, with the configuration it was read from.
type side struct {
	cfg *HostConfig
	// Bootstrap's Hosts are nil when the configuration could not be read far enough.
	*Bootstrap
}

// parse reads one configuration and checks the rules that concern it alone.
func (c *checker) parse(cfg *HostConfig) *side {
	return &side{cfg: cfg, Bootstrap: c.bootstrap(cfg.BrokerTOML, cfg.Hostname)}
}

// compare checks s against the root side: the same hosts at the same ranks (but rank 0, which
// a burst side names by the lead broker's address), and the same parents.
func (c *checker) compare(root, s *side) {
	host := s.cfg.Hostname
	if len(s.Hosts) != len(root.Hosts) {
		c.add(host, RuleSameHosts, "%d hosts here, %d on the root side (%s)", len(s.Hosts), len(root.Hosts), root.cfg.Hostname)
	}
	for r := 1; r < len(s.Hosts) && r < len(root.Hosts); r++ {
		if s.Hosts[r].Name != root.Hosts[r].Name {
			c.add(host, RuleSameHosts, "rank %d is %s here but %s on the root side (%s)", r, s.Hosts[r].Name, root.Hosts[r].Name, root.cfg.Hostname)
			break
		}
	}
	if s.Parents == nil || root.Parents == nil {
		return
	}
	var differ []string
	for r := 1; r < len(s.Parents) && r < len(root.Parents); r++ {
		if s.Parents[r] != root.Parents[r] {
			differ = append(differ, fmt.Sprintf("rank %d (%s) has parent %d here but %d on the root side", r, s.name(r), s.Parents[r], root.Parents[r]))
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
	if s.Parents == nil || s.Rank <= 0 {
		return
	}
	host := s.cfg.Hostname
	p := s.Parents[s.Rank]
	if p == 0 {
		if s.cfg.Cluster == root.cfg.Cluster {
			return
		}
		// From another cluster rank 0 is reached through the address it is exposed at; a pod
		// hostname or a Service DNS name of the root's cluster does not resolve there.
		uri := s.ConnectURI(0)
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
		c.add(host, RuleReachable, "the parent %s (rank %d) is not among the brokers, so rank %d waits for it", parent, p, s.Rank)
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
			c.advise(cfg.Hostname, RuleCertificate, "the certificate differs from %s's, so the broker never joins", first.Hostname)
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
