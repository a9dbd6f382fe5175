package brokersim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fluxfed/fluxfed/e2e/brokersim/curvezmq"
	"github.com/fluxfed/fluxfed/e2e/fluxcheck"
	"github.com/fluxfed/fluxfed/member/render/curve"
)

// Place is where a broker finds itself in the overlay, computed from its own broker.toml and
// hostname alone, as a flux-broker does at startup.
type Place struct {
	Hostname string
	// Rank is the index of Hostname in the expanded hosts; Size the number of hosts.
	Rank, Size int
	// Topology is [tbon] topo as written, "" for Flux's default (custom).
	Topology string
	// Parent is the parent's rank, -1 on rank 0; ParentHost its host.
	Parent     int
	ParentHost string
	// Children are the ranks whose hello this broker accepts, ascending.
	Children []int
	// Bind is the URI the broker binds, with %h and %p substituted; "" without children, since
	// only a broker with children binds.
	Bind string
	// Connect is the parent's connect URI, with %h and %p substituted; "" on rank 0.
	Connect string
}

// ConfigError reports a configuration a flux-broker refuses to start with.
type ConfigError struct {
	Hostname string
	// Violations are the fatal violations of the file (see fluxcheck.Violation.Fatal).
	Violations []fluxcheck.Violation
	// Reason is set instead when the file could not be read at all.
	Reason string
}

// Error lists the violations.
func (e *ConfigError) Error() string {
	if len(e.Violations) == 0 {
		return e.Hostname + ": the broker does not start: " + e.Reason
	}
	var details []string
	for _, v := range e.Violations {
		details = append(details, string(v.Rule)+": "+v.Detail)
	}
	return e.Hostname + ": the broker does not start: " + strings.Join(details, "; ")
}

// Locate computes the place of the broker named hostname whose broker.toml is brokerTOML. It
// returns a *ConfigError when a flux-broker would not start with that file: it cannot be
// read, hostname is not in its hosts, a URI or the topology is invalid, a broker with
// children has no bind URI or its parent no connect URI.
func Locate(brokerTOML []byte, hostname string) (*Place, error) {
	p, _, err := locate(brokerTOML, hostname)
	return p, err
}

func locate(brokerTOML []byte, hostname string) (*Place, *fluxcheck.Bootstrap, error) {
	b, violations := fluxcheck.ParseBootstrap(brokerTOML, hostname)
	var fatal []fluxcheck.Violation
	for _, v := range violations {
		if v.Fatal() {
			fatal = append(fatal, v)
		}
	}
	if len(fatal) > 0 {
		return nil, nil, &ConfigError{Hostname: hostname, Violations: fatal}
	}
	switch {
	case b == nil:
		return nil, nil, &ConfigError{Hostname: hostname, Reason: "its hosts cannot be read"}
	case b.Rank < 0:
		return nil, nil, &ConfigError{Hostname: hostname, Reason: hostname + " not found in hosts"}
	case b.Parents == nil:
		return nil, nil, &ConfigError{Hostname: hostname, Reason: "the topology is invalid"}
	}
	p := &Place{
		Hostname: hostname,
		Rank:     b.Rank,
		Size:     b.Size(),
		Topology: b.Topology,
		Parent:   b.Parent(b.Rank),
		Children: b.Children(b.Rank),
	}
	if len(p.Children) > 0 {
		p.Bind = b.BindURI(b.Rank)
	}
	if p.Parent >= 0 {
		p.ParentHost = b.Hosts[p.Parent].Name
		p.Connect = b.ConnectURI(p.Parent)
	}
	return p, b, nil
}

// CertificateKeys returns the keypair a stand-in uses in the CURVE handshake: the keys of the
// certificate file, read as flux-core reads it (curve.Parse, which checks that the public key
// is the secret key's). The metadata and comments do not matter, as in Flux.
func CertificateKeys(certFile []byte) (curvezmq.KeyPair, error) {
	c, err := curve.Parse(certFile)
	if err != nil {
		return curvezmq.KeyPair{}, err
	}
	var keys curvezmq.KeyPair
	public, err := curve.DecodeZ85(c.PublicKey())
	if err != nil {
		return keys, fmt.Errorf("curve certificate: %w", err)
	}
	copy(keys.Public[:], public)
	// File is the only way the curve package lets the secret key out: read it back from the
	// file it writes, whose layout it fixes.
	for line := range strings.SplitSeq(string(curve.File(c)), "\n") {
		if z85, ok := strings.CutPrefix(line, `    secret-key = "`); ok {
			secret, err := curve.DecodeZ85(strings.TrimSuffix(z85, `"`))
			if err != nil || len(secret) != curve.KeySize {
				return curvezmq.KeyPair{}, errors.New("curve certificate: the secret key cannot be read back")
			}
			copy(keys.Secret[:], secret)
			return keys, nil
		}
	}
	return curvezmq.KeyPair{}, errors.New("curve certificate: no secret key")
}
