package fluxcheck

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxfed/fluxfed/hostlist"
)

// Resources is what the [resource] config entries of one broker's file give one host: its core
// and GPU ids and its properties, every entry that names the host added together.
type Resources struct {
	Cores, GPUs []int
	Properties  []string
}

// equal reports whether r and o describe the same hardware and properties.
func (r Resources) equal(o Resources) bool {
	return slices.Equal(r.Cores, o.Cores) && slices.Equal(r.GPUs, o.GPUs) && slices.Equal(r.Properties, o.Properties)
}

func (r Resources) String() string {
	return fmt.Sprintf("cores %v, GPUs %v, properties %v", r.Cores, r.GPUs, r.Properties)
}

// resourceConfigKeys are the keys of a [resource] config entry (flux-config-resource(5)).
var resourceConfigKeys = map[string]bool{"hosts": true, "cores": true, "gpus": true, "properties": true}

// resources reads [resource] config as the resource module builds R from it, and checks that
// R then holds exactly the bootstrap hosts, since every broker re-ranks R by its hostlist and
// shuts down when they differ. It returns the resources of every rank, nil without config.
func (c *checker) resources(host string, b *Bootstrap, v any) []Resources {
	table, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	raw, present := table["config"]
	if !present {
		return nil
	}
	if _, both := table["path"]; both {
		c.advise(host, RuleResourceConfig, "both path and config are set; Flux ignores path")
	}
	arr, ok := raw.([]any)
	if !ok {
		c.add(host, RuleResourceConfig, "config must be an array of tables, not %T", raw)
		return nil
	}
	byHost := map[string]*Resources{}
	var order []string
	for i, item := range arr {
		entry, ok := item.(map[string]any)
		if !ok {
			c.add(host, RuleResourceConfig, "config[%d] must be a table, not %T", i, item)
			return nil
		}
		for _, k := range sortedKeys(entry) {
			if !resourceConfigKeys[k] {
				c.add(host, RuleResourceConfig, "config[%d] has the unknown key %s", i, k)
			}
		}
		hostsValue, _ := entry["hosts"].(string)
		names, err := hostlist.Expand(hostsValue)
		if hostsValue == "" || err != nil {
			c.add(host, RuleResourceConfig, "config[%d].hosts %q is not an RFC 29 hostlist", i, hostsValue)
			return nil
		}
		var add Resources
		for _, kv := range []struct {
			key string
			dst *[]int
		}{{"cores", &add.Cores}, {"gpus", &add.GPUs}} {
			v, present := entry[kv.key]
			if !present {
				continue
			}
			s, isStr := v.(string)
			ids, err := parseIDSet(s)
			if !isStr || err != nil {
				c.add(host, RuleResourceConfig, "config[%d].%s %v is not an RFC 22 idset", i, kv.key, v)
				return nil
			}
			*kv.dst = ids
		}
		if v, present := entry["properties"]; present {
			list, isList := v.([]any)
			if !isList {
				c.add(host, RuleResourceConfig, "config[%d].properties must be an array of strings, not %T", i, v)
				return nil
			}
			for _, p := range list {
				s, isStr := p.(string)
				if !isStr || s == "" {
					c.add(host, RuleResourceConfig, "config[%d].properties holds %v, not a property name", i, p)
					return nil
				}
				add.Properties = append(add.Properties, s)
			}
		}
		for _, name := range names {
			r, seen := byHost[name]
			if !seen {
				r = &Resources{}
				byHost[name] = r
				order = append(order, name)
			}
			r.Cores = union(r.Cores, add.Cores)
			r.GPUs = union(r.GPUs, add.GPUs)
			r.Properties = union(r.Properties, add.Properties)
		}
	}
	out := make([]Resources, len(b.Hosts))
	for r, h := range b.Hosts {
		res, found := byHost[h.Name]
		if !found {
			c.add(host, RuleResourceHosts, "rank %d (%s) is a bootstrap host that the resource config does not list, so the broker cannot re-rank R", r, h.Name)
			return nil
		}
		if len(res.Cores) == 0 {
			c.add(host, RuleResourceConfig, "rank %d (%s) has no cores in the resource config", r, h.Name)
		}
		out[r] = *res
	}
	for _, name := range order {
		if _, found := b.index[name]; !found {
			c.add(host, RuleResourceHosts, "the resource config lists %s, which is not a bootstrap host, so the broker cannot re-rank R", name)
			return nil
		}
	}
	return out
}

// compareResources checks that s describes every rank as the root side does.
func (c *checker) compareResources(root, s *side) {
	host := s.cfg.Hostname
	switch {
	case (root.Resources == nil) != (s.Resources == nil):
		here, there := "no resource config", "resource config"
		if s.Resources != nil {
			here, there = there, here
		}
		c.add(host, RuleSameResources, "%s here, %s on the root side (%s)", here, there, root.cfg.Hostname)
		return
	case root.Resources == nil || len(root.Resources) != len(s.Resources):
		return // no config, or the hosts differ, which RuleSameHosts reports
	}
	for r := range s.Resources {
		if !s.Resources[r].equal(root.Resources[r]) {
			c.add(host, RuleSameResources, "rank %d (%s) has %s here but %s on the root side (%s)",
				r, s.name(r), s.Resources[r], root.Resources[r], root.cfg.Hostname)
			return
		}
	}
}

// parseIDSet expands an RFC 22 idset without brackets: "0-3,7".
func parseIDSet(s string) ([]int, error) {
	var ids []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q is not an id", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				return nil, fmt.Errorf("%q is not a range of at most 65537 ids", part)
			}
		}
		for id := a; id <= b; id++ {
			ids = append(ids, id)
		}
	}
	return union(nil, ids), nil
}

// union returns the sorted union of a and b without duplicates.
func union[T interface{ ~int | ~string }](a, b []T) []T {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
