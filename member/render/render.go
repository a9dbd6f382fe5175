// Package render turns a MiniCluster into the objects and files that make it a Flux instance.
// Everything here is pure: same MiniCluster in, same output out, with no client, clock, logger
// or randomness (entropy for a new CURVE keypair is passed in). The reconciler applies what
// Render returns; `fluxfed plan` writes the same files to disk. The names the renderers, the
// reconciler and the hub share are in the leaf package names.
package render

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/member/render/brokerconf"
	"github.com/fluxfed/fluxfed/member/render/scripts"
	"github.com/fluxfed/fluxfed/member/render/workload"
)

// Object is one object of a MiniCluster as a server-side apply configuration.
type Object struct {
	Kind  schema.GroupVersionKind
	Apply runtime.ApplyConfiguration
}

// Rendered is everything a MiniCluster consists of, except its CURVE certificate (generated
// once, not rendered). The reconciler applies Objects; `fluxfed plan` writes the same content to
// disk.
type Rendered struct {
	// Layout is the rank layout the broker config was rendered from.
	Layout *bursting.Layout
	// BrokerTOML is the broker config every broker of the MiniCluster reads.
	BrokerTOML []byte
	// Scripts are the entrypoint scripts, keyed by file name.
	Scripts map[string]string
	// Objects are the Kubernetes objects in the order they are applied: configuration first,
	// the Jobs whose pods read it last.
	Objects []Object
}

var (
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	serviceKind   = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	jobKind       = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
)

// Render renders mc with the pure builders of member/render. Every error is about the spec: the
// MiniCluster cannot be rendered until it changes.
func Render(mc *fluxv1alpha2.MiniCluster) (*Rendered, error) {
	layout, err := bursting.NewLayout(mc)
	if err != nil {
		return nil, err
	}
	toml, err := brokerconf.BrokerTOML(mc, layout)
	if err != nil {
		return nil, fmt.Errorf("rendering broker.toml: %w", err)
	}
	entrypoints, err := scripts.Render(mc, scripts.Inputs{
		Hostlist: layout.Hostlist,
		Quorum:   layout.Quorum,
		Follower: mc.IsBurstChild(),
		// R comes from broker.toml when it describes each group's hardware.
		ResourcesFromConfig: brokerconf.ResourcesFromConfig(mc, layout),
	})
	if err != nil {
		return nil, fmt.Errorf("rendering the entrypoint scripts: %w", err)
	}
	job, err := workload.Job(mc)
	if err != nil {
		return nil, err
	}
	services, err := workload.Services(mc)
	if err != nil {
		return nil, err
	}

	objects := []Object{
		{Kind: configMapKind, Apply: FluxConfigMap(mc, toml, layout.Hostlist)},
		{Kind: configMapKind, Apply: EntrypointConfigMap(mc, entrypoints)},
		{Kind: serviceKind, Apply: workload.HeadlessService(mc)},
	}
	if services != nil {
		objects = append(objects, Object{Kind: jobKind, Apply: services})
	}
	objects = append(objects, Object{Kind: jobKind, Apply: job})
	return &Rendered{Layout: layout, BrokerTOML: toml, Scripts: entrypoints, Objects: objects}, nil
}
