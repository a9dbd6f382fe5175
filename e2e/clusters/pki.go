package clusters

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// adminUser is the common name of the administrator's client certificate; its organization
// system:masters is what makes it an administrator.
const (
	adminUser  = "fluxfed-e2e-admin"
	adminGroup = "system:masters"
	// frontProxyClient is the name of the certificate with which the API server forwards a
	// request to an aggregated API (the hub's gateway), and the only one trusted to name a user.
	frontProxyClient = "front-proxy-client"
)

// certValidity is long enough for clusters left up by `clusters up` for days.
const certValidity = 365 * 24 * time.Hour

// pki is one cluster's key material, as PEM.
type pki struct {
	CACert, CAKey        []byte
	ServingCert          []byte
	ServingKey           []byte
	KubeletCert          []byte // kwok's serving certificate, for the nodes' kubelet endpoint
	KubeletKey           []byte
	AdminCert, AdminKey  []byte
	ProxyClientCert      []byte // the API server's, when it forwards a request to an aggregated API
	ProxyClientKey       []byte
	ServiceAccountKey    []byte // private, signs service account tokens
	ServiceAccountPubKey []byte // public, verifies them
	caCert               *x509.Certificate
	caSigner             crypto.Signer
}

// pkiFiles are where a cluster's key material is written, for the components that read files.
type pkiFiles struct {
	CACert, ServingCert, ServingKey, KubeletCert, KubeletKey, ServiceAccountKey, ServiceAccountPubKey string
	ProxyClientCert, ProxyClientKey                                                                   string
}

// newPKI creates a CA, a serving certificate for the API server valid for the loopback addresses,
// the in-cluster names and serviceIP, a serving certificate for the kubelet endpoint (kwok's
// server) valid for 127.0.0.1 and nodeIPs, an administrator's client certificate, and the
// service account signing key. ECDSA P-256 keeps generation fast.
func newPKI(clusterName string, serviceIP net.IP, nodeIPs []net.IP) (*pki, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	caTemplate := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "fluxfed-e2e-ca-" + clusterName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	p := &pki{caSigner: caKey}
	if p.caCert, p.CACert, err = sign(caTemplate, caTemplate, caKey.Public(), caKey); err != nil {
		return nil, fmt.Errorf("self-signing the CA: %w", err)
	}
	if p.CAKey, err = encodeKey(caKey); err != nil {
		return nil, err
	}

	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, serviceIP}
	if p.ServingCert, p.ServingKey, err = p.leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    dns,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now); err != nil {
		return nil, fmt.Errorf("issuing the API server's serving certificate: %w", err)
	}
	if p.KubeletCert, p.KubeletKey, err = p.leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kwok-kubelet-" + clusterName},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, nodeIPs...),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now); err != nil {
		return nil, fmt.Errorf("issuing the kubelet endpoint's serving certificate: %w", err)
	}
	if p.AdminCert, p.AdminKey, err = p.leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: adminUser, Organization: []string{adminGroup}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now); err != nil {
		return nil, fmt.Errorf("issuing the administrator's client certificate: %w", err)
	}
	// Signed by the cluster's CA like every client certificate, but only its name is trusted to
	// forward identities (--requestheader-allowed-names).
	if p.ProxyClientCert, p.ProxyClientKey, err = p.leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClient},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now); err != nil {
		return nil, fmt.Errorf("issuing the front proxy's client certificate: %w", err)
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the service account key: %w", err)
	}
	if p.ServiceAccountKey, err = encodeKey(saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("encoding the service account public key: %w", err)
	}
	p.ServiceAccountPubKey = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	return p, nil
}

// leaf issues a certificate signed by the CA for a new key.
func (p *pki) leaf(template *x509.Certificate, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	template.NotBefore = now.Add(-time.Hour)
	template.NotAfter = now.Add(certValidity)
	template.KeyUsage = x509.KeyUsageDigitalSignature
	if _, certPEM, err = sign(template, p.caCert, key.Public(), p.caSigner); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func sign(template, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, []byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("drawing a serial number: %w", err)
	}
	template.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("signing a certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing a certificate just signed: %w", err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// write stores the files the components read under dir, private keys readable by the owner only.
func (p *pki) write(dir string) (pkiFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return pkiFiles{}, err
	}
	f := pkiFiles{
		CACert:               filepath.Join(dir, "ca.crt"),
		ServingCert:          filepath.Join(dir, "apiserver.crt"),
		ServingKey:           filepath.Join(dir, "apiserver.key"),
		KubeletCert:          filepath.Join(dir, "kubelet.crt"),
		KubeletKey:           filepath.Join(dir, "kubelet.key"),
		ServiceAccountKey:    filepath.Join(dir, "sa.key"),
		ServiceAccountPubKey: filepath.Join(dir, "sa.pub"),
		ProxyClientCert:      filepath.Join(dir, "front-proxy-client.crt"),
		ProxyClientKey:       filepath.Join(dir, "front-proxy-client.key"),
	}
	for path, data := range map[string][]byte{
		f.CACert:                     p.CACert,
		filepath.Join(dir, "ca.key"): p.CAKey,
		f.ServingCert:                p.ServingCert,
		f.ServingKey:                 p.ServingKey,
		f.KubeletCert:                p.KubeletCert,
		f.KubeletKey:                 p.KubeletKey,
		f.ServiceAccountKey:          p.ServiceAccountKey,
		f.ServiceAccountPubKey:       p.ServiceAccountPubKey,
		f.ProxyClientCert:            p.ProxyClientCert,
		f.ProxyClientKey:             p.ProxyClientKey,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return pkiFiles{}, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return f, nil
}
