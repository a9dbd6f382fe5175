package clusters

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// adminKubeconfig reaches a local cluster's API server as the administrator, with the CA and the
// client certificate inline, as the hub wants a member's kubeconfig (hub/members.Check). The
// cluster, the user and the context are all named after the cluster.
func adminKubeconfig(name, server string, p *pki) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.CACert}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: p.AdminCert, ClientKeyData: p.AdminKey}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return kc
}

// namedKubeconfig is the kubeconfig of one cluster of an Environment.
type namedKubeconfig struct {
	Name   string
	Config *clientcmdapi.Config
}

// normalize keeps only the current context of kc, with its cluster and user, and renames all
// three to name, so that kubeconfigs from any source (kind names its entries kind-<name>) merge
// into one with a context per cluster.
func normalize(name string, kc *clientcmdapi.Config) (*clientcmdapi.Config, error) {
	if name == "" {
		return nil, errors.New("normalizing a kubeconfig: no name")
	}
	if kc == nil || kc.CurrentContext == "" {
		return nil, fmt.Errorf("kubeconfig of %s: no current context", name)
	}
	kctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok || kctx == nil {
		return nil, fmt.Errorf("kubeconfig of %s: current context %q is not defined", name, kc.CurrentContext)
	}
	cluster, ok := kc.Clusters[kctx.Cluster]
	if !ok || cluster == nil {
		return nil, fmt.Errorf("kubeconfig of %s: context %q names cluster %q, which is not defined", name, kc.CurrentContext, kctx.Cluster)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = cluster.DeepCopy()
	out.Contexts[name] = &clientcmdapi.Context{Cluster: name, Namespace: kctx.Namespace}
	if kctx.AuthInfo != "" {
		user, ok := kc.AuthInfos[kctx.AuthInfo]
		if !ok || user == nil {
			return nil, fmt.Errorf("kubeconfig of %s: context %q names user %q, which is not defined", name, kc.CurrentContext, kctx.AuthInfo)
		}
		out.AuthInfos[name] = user.DeepCopy()
		out.Contexts[name].AuthInfo = name
	}
	out.CurrentContext = name
	return out, nil
}

// merge returns one kubeconfig with a context per cluster, named after the cluster, and the first
// cluster's context current.
func merge(kcs []namedKubeconfig) (*clientcmdapi.Config, error) {
	if len(kcs) == 0 {
		return nil, errors.New("merging kubeconfigs: none given")
	}
	out := clientcmdapi.NewConfig()
	for _, nk := range kcs {
		if _, dup := out.Contexts[nk.Name]; dup {
			return nil, fmt.Errorf("merging kubeconfigs: cluster %q appears twice", nk.Name)
		}
		n, err := normalize(nk.Name, nk.Config)
		if err != nil {
			return nil, err
		}
		out.Clusters[nk.Name] = n.Clusters[nk.Name]
		out.Contexts[nk.Name] = n.Contexts[nk.Name]
		if user, ok := n.AuthInfos[nk.Name]; ok {
			out.AuthInfos[nk.Name] = user
		}
	}
	out.CurrentContext = kcs[0].Name
	return out, nil
}

// writeKubeconfig writes kc to path, readable by the owner only since it holds a private key.
func writeKubeconfig(path string, kc *clientcmdapi.Config) error {
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
