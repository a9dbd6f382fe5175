package scripts

import (
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// This file is the entrypoints of the containers that do not run Flux: the other application
// containers (sidecar.sh.tmpl) and spec.services (service.sh.tmpl).

type sidecar struct {
	common
	view
	Command    string
	Socket     bool
	SocketPath string
	WaitSocket bool
}

func sidecarData(mc *fluxv1alpha2.MiniCluster, i int) sidecar {
	c := &mc.Spec.Containers[i]
	v := newView(mc)
	v.Sidecar = true
	return sidecar{
		common: newCommon(mc, names.ContainerName(mc, i),
			hook{"init", c.Commands.Init},
			hook{"servicePre", c.Commands.ServicePre},
			hook{"post", c.Commands.Post},
		),
		view:       v,
		Command:    c.Command,
		Socket:     !mc.Spec.Flux.DisableSocket,
		SocketPath: v.ViewRoot + "/run/flux/local",
		WaitSocket: !mc.Spec.Flux.NoWaitSocket,
	}
}

type service struct {
	common
	Command string
}

func serviceData(mc *fluxv1alpha2.MiniCluster, i int) service {
	c := &mc.Spec.Services[i]
	return service{
		common: newCommon(mc, c.Name,
			hook{"init", c.Commands.Init},
			hook{"servicePre", c.Commands.ServicePre},
			hook{"post", c.Commands.Post},
		),
		Command: c.Command,
	}
}
