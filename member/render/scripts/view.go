package scripts

import (
	"fmt"
	"strings"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// This file is the view: where the containers of a broker pod find Flux, and the provisioner that
// the flux-view init container runs to install it (provision.sh.tmpl).

// view holds what the scripts of broker-pod containers need to find Flux.
type view struct {
	// Sidecar is set for a container that does not run Flux, where a view that cannot be
	// staged is a warning instead of an error.
	Sidecar bool
	View    bool
	// Fluxion is false with flux.scheduler.simple: the view's Fluxion modules and commands are
	// still found, but its rc and modprobe files, which would load it, are not.
	Fluxion    bool
	MountPath  string
	ViewRoot   string
	PythonPath string
}

func newView(mc *fluxv1alpha2.MiniCluster) view {
	m := names.MountPath(mc)
	return view{
		View:       !mc.Spec.Flux.Container.Disable,
		Fluxion:    !mc.Spec.Flux.Scheduler.Simple,
		MountPath:  m,
		ViewRoot:   m + "/view",
		PythonPath: mc.Spec.Flux.Container.PythonPath,
	}
}

type provisioner struct {
	view
	MiniCluster     string
	Container       string
	Quiet           bool
	ConfigMountPath string
	CurveMountPath  string
	KeyBrokerTOML   string
	KeyHostlist     string
	KeyCurveCert    string
	FluxViewSh      string
}

func provisionerData(mc *fluxv1alpha2.MiniCluster) provisioner {
	name := mc.Spec.Flux.Container.Name
	if name == "" {
		name = "flux-view"
	}
	v := newView(mc)
	return provisioner{
		view:            v,
		MiniCluster:     mc.Name,
		Container:       name,
		Quiet:           mc.Spec.Logging.Quiet,
		ConfigMountPath: names.ConfigMountPath,
		CurveMountPath:  names.CurveMountPath,
		KeyBrokerTOML:   names.KeyBrokerTOML,
		KeyHostlist:     names.KeyHostlist,
		KeyCurveCert:    names.KeyCurveCert,
		FluxViewSh:      fluxViewSh(mc, v),
	}
}

// viewEnvPath is the file, under the mount path, where the entrypoint writes the variables that
// tell flux-core where the view's other packages (Fluxion) are, for flux-view.sh to source.
const viewEnvPath = "/fluxfed/view-env.sh"

// fluxViewSh is the file users source to use the instance from a shell in a broker pod, as
// with the Flux Operator: '. M/flux-view.sh && flux proxy $fluxsocket bash'.
func fluxViewSh(mc *fluxv1alpha2.MiniCluster, v view) string {
	var b strings.Builder
	b.WriteString("# Source this file to use the MiniCluster's Flux from a shell in this pod, then\n")
	b.WriteString("# connect to the instance with: flux proxy \"$fluxsocket\" bash\n")
	fmt.Fprintf(&b, "fluxfed_viewroot=%s\n", Quote(v.ViewRoot))
	if v.View {
		b.WriteString("export PATH=\"${PATH:+$PATH:}$fluxfed_viewroot/bin\"\n")
		if v.PythonPath != "" {
			fmt.Fprintf(&b, "export PYTHONPATH=\"${PYTHONPATH:+$PYTHONPATH:}\"%s\n", Quote(v.PythonPath))
		} else {
			b.WriteString("for fluxfed_site in \"$fluxfed_viewroot\"/lib/python3*/site-packages; do\n")
			b.WriteString("\tif [ -d \"$fluxfed_site\" ]; then export PYTHONPATH=\"${PYTHONPATH:+$PYTHONPATH:}$fluxfed_site\"; fi\n")
			b.WriteString("done\nunset fluxfed_site\n")
		}
		b.WriteString("export LD_LIBRARY_PATH=\"${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$fluxfed_viewroot/lib\"\n")
		// Where flux-core finds Fluxion in the view, as the entrypoint found it (view-env).
		fmt.Fprintf(&b, "if [ -r %[1]s ]; then . %[1]s; fi\n", Quote(v.MountPath+viewEnvPath))
	}
	if !mc.Spec.Flux.DisableSocket {
		b.WriteString("export fluxsocket=\"local://$fluxfed_viewroot/run/flux/local\"\n")
	}
	return b.String()
}
