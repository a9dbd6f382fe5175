package metrics

import (
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ServerOptions returns the options of the manager's metrics server at bindAddress ("0"
// disables it). With secure, it serves HTTPS and lets a scrape through only when the API server
// authenticates its bearer token and authorizes it to get the non-resource URL /metrics
// (Reviews): ClusterRole fluxfed-metrics-reader grants that. Its certificate is the one in
// CertDir when there is one, else self-signed. Without secure, it serves plain HTTP to anyone,
// for a manager run by hand.
//
// The manager's own ClusterRole lets it create both reviews (member/metrics.go).
func ServerOptions(bindAddress string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: bindAddress}
	if secure {
		o.SecureServing = true
		o.FilterProvider = Reviews
	}
	return o
}
