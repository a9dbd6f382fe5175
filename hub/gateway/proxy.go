package gateway

import (
	"net"
	"net/http"
	"net/url"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// upgradeTransport dials the hub's API server with the hub's TLS settings and writes the hub's
// credentials on the upgrade request, so that the caller's stream reaches the pod as the hub's.
func upgradeTransport(cfg *rest.Config) (proxy.UpgradeRequestRoundTripper, error) {
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	tlsConfig, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, err
	}
	conn := utilnet.SetOldTransportDefaults(&http.Transport{
		TLSClientConfig: tlsConfig,
		DialContext:     (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	})
	auth, err := transport.HTTPWrappersForConfig(tc, proxy.MirrorRequest)
	if err != nil {
		return nil, err
	}
	return proxy.NewUpgradeRequestRoundTripper(conn, auth), nil
}

type responder struct{ s *Server }

func (r responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	r.s.opts.Log.Info("A stream to the lead broker failed", "error", err.Error())
	writeStatus(w, err)
}

// proxyStream hands the caller's upgrade request to target on the hub's API server.
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, target *url.URL) error {
	up, err := upgradeTransport(s.opts.Hub)
	if err != nil {
		return err
	}
	h := proxy.NewUpgradeAwareHandler(target, up, false, true, responder{s})
	h.UpgradeTransport = up
	h.ServeHTTP(w, r)
	return nil
}
