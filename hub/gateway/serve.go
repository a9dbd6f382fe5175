package gateway

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/cert"
)

// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,resourceNames=v1alpha1.gateway.fluxfed.io,verbs=get;patch

// Serving says where the gateway listens and how the hub's API server trusts it.
type Serving struct {
	// Address is host:port to listen on.
	Address string
	// CertDir holds tls.crt and tls.key; empty: the gateway makes a certificate for Service and
	// writes its CA into its APIService, so that the hub's API server trusts it.
	CertDir string
	// Service is the Service of the APIService, whose DNS name the certificate must carry.
	Service types.NamespacedName
}

// Serve runs the gateway until ctx ends.
func (s *Server) Serve(ctx context.Context, serving Serving) error {
	var certificate tls.Certificate
	var err error
	if serving.CertDir != "" {
		certificate, err = tls.LoadX509KeyPair(filepath.Join(serving.CertDir, "tls.crt"), filepath.Join(serving.CertDir, "tls.key"))
		if err != nil {
			return fmt.Errorf("the gateway's certificate: %w", err)
		}
	} else {
		var ca []byte
		if certificate, ca, err = selfSigned(serving.Service); err != nil {
			return err
		}
		if err := s.trust(ctx, ca); err != nil {
			// The gateway still serves: an APIService installed later, or its caBundle set by
			// whoever installs it, reaches it.
			s.opts.Log.Info("The hub's API server will not reach the gateway until its APIService trusts it", "apiservice", APIServiceName, "reason", err.Error())
		}
	}
	ln, err := net.Listen("tcp", serving.Address)
	if err != nil {
		return fmt.Errorf("the gateway listening on %s: %w", serving.Address, err)
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{certificate},
			// Verified against the front-proxy CA by Authenticate, which reads it again as it
			// rotates.
			ClientAuth: tls.RequestClientCert,
		},
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	s.opts.Log.Info("Serving the gateway", "address", ln.Addr().String(), "apiservice", APIServiceName)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// selfSigned makes a CA and a serving certificate for the Service's DNS names, and returns the
// CA's certificate in PEM.
func selfSigned(svc types.NamespacedName) (tls.Certificate, []byte, error) {
	host := svc.Name + "." + svc.Namespace + ".svc"
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, nil, []string{svc.Name, svc.Name + "." + svc.Namespace, host + ".cluster.local"})
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("making the gateway's certificate: %w", err)
	}
	certificate, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	// The PEM holds the serving certificate, then the CA that signed it.
	var blocks [][]byte
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		blocks = append(blocks, pem.EncodeToMemory(b))
	}
	if len(blocks) < 2 {
		return tls.Certificate{}, nil, errors.New("making the gateway's certificate: no CA")
	}
	return certificate, blocks[len(blocks)-1], nil
}

// trust writes ca into the gateway's APIService.
func (s *Server) trust(ctx context.Context, ca []byte) error {
	patch := fmt.Sprintf(`{"spec":{"caBundle":%q,"insecureSkipTLSVerify":false}}`, base64.StdEncoding.EncodeToString(ca))
	err := s.hub.CoreV1().RESTClient().Patch(types.MergePatchType).AbsPath("/apis/apiregistration.k8s.io/v1/apiservices", APIServiceName).
		Body([]byte(patch)).Do(ctx).Error()
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("no APIService %s (deploy/hub installs it)", APIServiceName)
	}
	return err
}
