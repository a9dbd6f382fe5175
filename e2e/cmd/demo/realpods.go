package main

import (
	"context"
	"io"
	"time"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/realpods"
)

// realPodsDemo is make demo PODS=real: the demo of FLUX=real (realDemo) on clusters whose only
// node is real, a containerd and a kubelet each (fleet.Options.RealNodes). The kubelets run the
// pods as the member reconciler renders them, in the images of e2e/realpods: the flux-view init
// container copies the view, the rendered entrypoint starts the broker, the brokers of a cluster
// find each other through its pod network and CoreDNS, the burst brokers reach rank 0 through
// the root's NodePort on the hub's node, and the hub's flux commands go through the lead's
// kubelet. This program plays kube-proxy for the hub's NodePorts (fleet.NodePorts), as the
// real-pod lane's tests do.
func realPodsDemo(ctx context.Context, f *fleet.Fleet, out io.Writer, say func(string, ...any)) error {
	ports, err := fleet.ServeNodePorts(f.Hub, f.Members, say)
	if err != nil {
		return err
	}
	defer ports.Close()
	say("Every cluster runs one real node (containerd and a kubelet) and no simulated one; this program plays kube-proxy for the hub's node ports, which the members' pods reach at %s", fleet.HubAddress)
	return realDemo(ctx, f, out, say, true)
}

// realPodsTimeout bounds each wait of the demo on real pods (every rank online, the elastic
// cycle): under a minute each at load 7-14 on 2 cores; at load 40-80 the elastic cycle took
// more than 8 minutes (the hub noticed the waiting job 5 minutes after its submit).
const realPodsTimeout = 15 * time.Minute

// realPodsChanges says what onRealPods changes in an example.
func realPodsChanges() string {
	return "image " + realpods.AppImage + " (imagePullPolicy Never, no workingDir), flux view " + realpods.ViewImage + ", expose.address " + fleet.HubAddress.String()
}

// onRealPods makes an example run on the real nodes: its containers in the application image of
// e2e/realpods, which has no workingDir of the example's image, and the flux view from the view
// image (its tag is found on the node), both imported into every node and never pulled; its lead broker exposed at the hub's
// address as the members' pods reach it (fleet.HubAddress).
func onRealPods(root *fluxv1alpha2.MiniCluster) {
	for i := range root.Spec.Containers {
		c := &root.Spec.Containers[i]
		c.Image, c.ImagePullPolicy, c.WorkingDir = realpods.AppImage, fluxv1alpha2.PullNever, ""
	}
	root.Spec.Flux.Container.Image = realpods.ViewImage
	if root.Spec.Flux.Bursting.Expose == nil {
		root.Spec.Flux.Bursting.Expose = &fluxv1alpha2.Expose{}
	}
	root.Spec.Flux.Bursting.Expose.Address = fleet.HubAddress.String()
}
