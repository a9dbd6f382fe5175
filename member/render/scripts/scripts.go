package scripts

import (
	"bytes"
	"embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hostlist"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// This file is Render, the ConfigMap keys and container commands that tie the scripts to the
// pods, and what every template shares.

// Inputs are the values the scripts need beyond the MiniCluster itself, computed by the caller
// from the federation layout.
type Inputs struct {
	// Hostlist is the RFC 29 hostlist the brokers bootstrap with; it is also in the flux
	// ConfigMap (names.KeyHostlist), from which the pods encode R. The scripts use it to warn
	// when a pod started with a different one.
	Hostlist string
	// Quorum is the number of brokers rank 0 waits for before it starts the job
	// (-Sbroker.quorum); 0 leaves it unset, as on a burst child.
	Quorum int
	// Follower is true on a burst child: rank 0 lives in another MiniCluster, so every pod
	// runs a follower broker and none runs the job.
	Follower bool
	// TBONTopo, when set, is passed to every broker as -Stbon.topo. Leave it empty when
	// broker.toml already fixes the tree (parent keys); both sides of a federation must agree.
	TBONTopo string
	// ResourcesFromConfig is true when broker.toml describes the instance's resources itself
	// ([resource] config, see brokerconf.ResourcesFromConfig): the entrypoint then encodes no R.
	ResourcesFromConfig bool
}

// ProvisionerKey is the ConfigMap key of the script the flux-view init container runs.
const ProvisionerKey = "provision.sh"

// ContainerKey returns the ConfigMap key of the entrypoint of the application container
// (spec.containers) with this name.
func ContainerKey(name string) string { return "container-" + name + ".sh" }

// ServiceKey returns the ConfigMap key of the entrypoint of the spec.services container with
// this name.
func ServiceKey(name string) string { return "service-" + name + ".sh" }

// Defaults of the spec that the schema fills in; the renderers apply them too, so that a
// MiniCluster that was not defaulted by an API server renders the same.
const (
	// DefaultOutputDir is where batch jobs write their output when containers[].logs is empty.
	DefaultOutputDir = "/tmp/fluxout"
	// DefaultConnectTimeout is spec.flux.connectTimeout when it is not set at all.
	DefaultConnectTimeout = "5s"
	// DefaultLogLevel is spec.flux.logLevel when it is not set.
	DefaultLogLevel = 6
)

// ProvisionerCommand returns the command of the flux-view init container.
func ProvisionerCommand() []string {
	return []string{"/bin/sh", names.EntrypointMountPath + "/" + ProvisionerKey}
}

// ContainerCommand returns the command of spec.containers[i]. The container that runs Flux,
// and every other container with a command, runs its rendered entrypoint; a container with
// noWrapEntrypoint runs its command with /bin/sh -c; one without a command keeps its image's
// entrypoint (nil).
func ContainerCommand(mc *fluxv1alpha2.MiniCluster, i int) []string {
	c := &mc.Spec.Containers[i]
	switch {
	case isFluxContainer(mc, i):
		return []string{"/bin/bash", names.EntrypointMountPath + "/" + ContainerKey(names.ContainerName(mc, i))}
	case c.Command == "":
		return nil
	case c.NoWrapEntrypoint:
		return []string{"/bin/sh", "-c", c.Command}
	default:
		return []string{"/bin/bash", names.EntrypointMountPath + "/" + ContainerKey(names.ContainerName(mc, i))}
	}
}

// ServiceCommand returns the command of spec.services[i], with the same rules as
// ContainerCommand for a container that does not run Flux.
func ServiceCommand(mc *fluxv1alpha2.MiniCluster, i int) []string {
	c := &mc.Spec.Services[i]
	switch {
	case c.Command == "":
		return nil
	case c.NoWrapEntrypoint:
		return []string{"/bin/sh", "-c", c.Command}
	default:
		return []string{"/bin/bash", names.EntrypointMountPath + "/" + ServiceKey(c.Name)}
	}
}

func isFluxContainer(mc *fluxv1alpha2.MiniCluster, i int) bool {
	return mc.FluxContainer() == &mc.Spec.Containers[i]
}

//go:embed templates/*.tmpl
var templateFS embed.FS

// templates are parsed once; a template error is a bug in this package, found by any test.
var templates = template.Must(template.New("scripts").Funcs(template.FuncMap{
	"q":     Quote,
	"words": quoteWords,
	"c":     commentValue,
}).Option("missingkey=error").ParseFS(templateFS, "templates/*.tmpl"))

// commentValue returns s for a comment of a script: double-quoted with Go's escapes, so that a
// newline (or any other control character) from the spec cannot end the comment and start a
// command. Nothing else is special in a comment.
func commentValue(s string) string { return strconv.Quote(s) }

// Render returns the data of the entrypoint ConfigMap (names.EntrypointConfigMapName): the
// provisioner under ProvisionerKey, an entrypoint under ContainerKey for the container that
// runs Flux and for every other container that runs a wrapped command (see ContainerCommand),
// and one under ServiceKey for every spec.services container with a wrapped command. It
// returns an error for a spec the schema admits but no script can honour.
func Render(mc *fluxv1alpha2.MiniCluster, in Inputs) (map[string]string, error) {
	data, err := render(mc, in)
	if err != nil {
		return nil, err
	}
	// A NUL cannot be part of a shell script: bash drops it and dash refuses the file as binary.
	// The schema refuses it in paths; anywhere else it has no meaning either.
	for _, key := range slices.Sorted(maps.Keys(data)) {
		if strings.ContainsRune(data[key], 0) {
			return nil, fmt.Errorf("rendering %s: a value of the spec contains a NUL character, which no shell script can hold", key)
		}
	}
	return data, nil
}

func render(mc *fluxv1alpha2.MiniCluster, in Inputs) (map[string]string, error) {
	if err := checkInputs(mc, in); err != nil {
		return nil, err
	}
	flux := mc.FluxContainer()
	if flux == nil {
		return nil, fmt.Errorf("spec.containers: no container runs Flux")
	}
	data := map[string]string{}
	prov, err := execute("provision.sh.tmpl", provisionerData(mc))
	if err != nil {
		return nil, err
	}
	data[ProvisionerKey] = prov

	seen := map[string]bool{}
	for i := range mc.Spec.Containers {
		name := names.ContainerName(mc, i)
		if seen[name] {
			return nil, fmt.Errorf("spec.containers[%d]: container name %q is used twice (the container that runs Flux is named after the MiniCluster when it has no name)", i, name)
		}
		seen[name] = true
		cmd := ContainerCommand(mc, i)
		if len(cmd) == 0 || cmd[0] != "/bin/bash" {
			continue // the image's entrypoint, or noWrapEntrypoint
		}
		var script string
		if isFluxContainer(mc, i) {
			d, err := fluxScriptData(mc, i, in)
			if err != nil {
				return nil, err
			}
			script, err = execute("flux.sh.tmpl", d)
			if err != nil {
				return nil, err
			}
		} else {
			script, err = execute("sidecar.sh.tmpl", sidecarData(mc, i))
			if err != nil {
				return nil, err
			}
		}
		data[ContainerKey(name)] = script
	}
	for i := range mc.Spec.Services {
		if cmd := ServiceCommand(mc, i); len(cmd) == 0 || cmd[0] != "/bin/bash" {
			continue
		}
		script, err := execute("service.sh.tmpl", serviceData(mc, i))
		if err != nil {
			return nil, err
		}
		data[ServiceKey(mc.Spec.Services[i].Name)] = script
	}
	return data, nil
}

func checkInputs(mc *fluxv1alpha2.MiniCluster, in Inputs) error {
	if mc.Name == "" {
		return fmt.Errorf("metadata.name is empty")
	}
	if strings.TrimSpace(in.Hostlist) == "" {
		return fmt.Errorf("the hostlist is empty")
	}
	if strings.ContainsAny(in.Hostlist, " \t\r\n") {
		return fmt.Errorf("hostlist %q contains blanks", in.Hostlist)
	}
	if _, err := hostlist.Parse(in.Hostlist); err != nil {
		return fmt.Errorf("hostlist %q: %w", in.Hostlist, err)
	}
	if in.Quorum < 0 {
		return fmt.Errorf("quorum %d is negative", in.Quorum)
	}
	// Broker options and attributes reach the broker through flux start, which splits broker
	// options at commas.
	if strings.Contains(names.MountPath(mc), ",") {
		return fmt.Errorf("spec.flux.container.mountPath %q: a comma cannot be passed to the broker", names.MountPath(mc))
	}
	// The schema refuses white space in the mount path too; a MiniCluster stored before it did
	// would start a lead broker whose rc1 fails, and restarts, forever: flux-core loads the
	// crontabs of the cron directory (under the mount path) with a shell command that splits
	// their paths at blanks.
	if strings.ContainsFunc(names.MountPath(mc), unicode.IsSpace) {
		return fmt.Errorf("spec.flux.container.mountPath %q: Flux's startup scripts split paths at white space", names.MountPath(mc))
	}
	if strings.Contains(mc.Spec.Archive.Path, ",") {
		return fmt.Errorf("spec.archive.path %q: a comma cannot be passed to the broker", mc.Spec.Archive.Path)
	}
	return nil
}

func execute(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("rendering %s: %w", name, err)
	}
	return b.String(), nil
}

// hook is a snippet from the spec, stored in the script as fluxfed_<Var>.
type hook struct {
	Var  string
	Code string
}

// common holds what every script template needs.
type common struct {
	MiniCluster string
	Container   string
	Strict      bool
	Quiet       bool
	Hooks       []hook
	HookSet     map[string]bool
}

func newCommon(mc *fluxv1alpha2.MiniCluster, container string, hooks ...hook) common {
	c := common{
		MiniCluster: mc.Name,
		Container:   container,
		Strict:      mc.Spec.Logging.Strict,
		Quiet:       mc.Spec.Logging.Quiet,
		HookSet:     map[string]bool{},
	}
	for _, h := range hooks {
		// Every hook the template may ask about is in the set, so that a misspelt one is a
		// template error instead of a silently skipped snippet.
		c.HookSet[h.Var] = false
		if strings.TrimSpace(h.Code) == "" {
			continue
		}
		c.Hooks = append(c.Hooks, h)
		c.HookSet[h.Var] = true
	}
	return c
}
