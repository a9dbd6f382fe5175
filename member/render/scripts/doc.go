// Package scripts renders the entrypoint ConfigMap of a MiniCluster: the provisioner that the
// flux-view init container runs, one entrypoint per application container and one per
// spec.services container.
//
// The scripts follow the pod contract that package workload builds the pods for: the init
// container fills the volume at spec.flux.container.mountPath (M) with the Flux install (the
// "view"), broker.toml, the hostlist and the CURVE certificate; the container that runs Flux
// encodes R from that hostlist and starts a broker with M/view/etc/flux/config as its config
// directory. Pod index 0 of a root MiniCluster is the lead broker, which runs the job.
//
// Everything from the spec reaches a script as a quoted shell word (see Quote). Snippets that
// are shell code by design (commands.*, preCommand) are stored as quoted strings and run with
// eval at their place, so that no input can change the structure of a script, and the CURVE
// secret key is never printed.
//
// Spec fields these scripts deliberately give no effect, and why:
//   - containers[].cores: the Flux Operator only exposed it to templates that no longer use it;
//     Flux learns the cores from the node (flux R encode --local). Only a MiniCluster that
//     bursts gives it a meaning, in broker.toml (package bursting, ContainerHardware).
//   - containers[].fluxUser and commands.runFluxAsRoot: the Flux Operator's v1alpha2 scripts
//     run Flux as the container's own user and ignore both; so do these. A user that is not root
//     needs sudo, to take over the files the init container installed.
//   - containers[].diagnostics: dropped by the Flux Operator's v1alpha2 scripts.
//   - flux.arch: it chose the build of helper binaries that the Flux Operator downloaded at pod
//     start (wait-fs); these scripts need none (init containers finish before the application
//     containers start, and waiting for the socket is a shell loop).
//   - the flux.container.name and flux.container.workingDir of the init container matter only
//     to package workload.
//
// Fields that shape broker.toml, the certificate or the Job (flux.scheduler, flux.topology,
// flux.brokerConfig, flux.curveCert, flux.minimalService, pod.*, ...) are rendered by the
// packages that own those objects; the topology reaches the brokers here only through
// Inputs.TBONTopo.
//
// # Where things are
//
// scripts.go is Render and the keys and commands the pods use; view.go the view and the
// provisioner (provision.sh.tmpl); flux.go the entrypoint of the container that runs Flux
// (flux.sh.tmpl) and job.go the lead broker's job; sidecar.go the entrypoints of the other
// containers and of spec.services; quote.go how values from the spec become shell words. The
// templates are in templates/, where common.tmpl holds the shell every entrypoint shares.
package scripts
