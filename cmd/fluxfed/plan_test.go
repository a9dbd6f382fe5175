package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/fluxcheck"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

func TestPlanWritesOneFolderPerHost(t *testing.T) {
	out := t.TempDir()
	example := filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml")
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-f", example, "--out", out}, &stdout, &bytes.Buffer{}))

	summary := stdout.String()
	for _, want := range []string{
		"Hostlist:  bursting-root-[0-1],burst-a-[0-2],burst-b-[0-1]",
		"Quorum:    2",
		"2-4    burst-a-[0-2]",
		"2→0, 3-4→2",
		"Wrote 2 host folders",
	} {
		require.Contains(t, summary, want)
	}

	var configs []fluxcheck.HostConfig
	for _, host := range []string{"bursting-root-0", "bursting-root-1"} {
		dir := filepath.Join(out, host)
		read := func(name string) []byte {
			data, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			return data
		}
		require.Equal(t, host+"\n", string(read("hostname")))
		require.Equal(t, "bursting-root-[0-1],burst-a-[0-2],burst-b-[0-1]\n", string(read("hostlist")))
		info, err := os.Stat(filepath.Join(dir, "curve.cert"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o400), info.Mode().Perm(), "the broker refuses a certificate others can read")
		configs = append(configs, fluxcheck.HostConfig{Hostname: host, BrokerTOML: read("broker.toml"), CurveCert: read("curve.cert")})
	}
	require.NoError(t, fluxcheck.Check(configs))

	manifests, err := os.ReadFile(filepath.Join(out, "manifests.yaml"))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(manifests), "kind: ConfigMap\n"))
	require.Contains(t, string(manifests), "kind: Job\n")
	require.NotContains(t, string(manifests), "secret-key")
}

func TestPlanRefusesAnInvalidMiniClusterLikeTheAPIServer(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata: {name: bad}
spec:
  size: 4
  maxSize: 2
  containers: [{image: rockylinux:9}]
  flux: {logLevel: 9}
`), 0o644))
	err := run(context.Background(), []string{"plan", "-f", manifest}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, `MiniCluster "bad" is invalid`)
	require.ErrorContains(t, err, "spec.maxSize: Invalid value")
	require.ErrorContains(t, err, "spec.size must not exceed spec.maxSize")
	require.ErrorContains(t, err, "spec.flux.logLevel: Invalid value: 9")
}

func TestPlanNeedsAFile(t *testing.T) {
	err := run(context.Background(), []string{"plan"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "--filename (-f) is required")
	require.ErrorContains(t, err, "Run 'fluxfed plan --help' for usage")
}

// TestPlanPrintsObjects checks -o yaml and -o json: the objects manifests.yaml holds, on stdout
// for kubectl, and never the CURVE Secret.
func TestPlanPrintsObjects(t *testing.T) {
	example := filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml")
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-f", example, "--out", out, "-o", "yaml"}, &stdout, &stderr))
	manifests, err := os.ReadFile(filepath.Join(out, "manifests.yaml"))
	require.NoError(t, err)
	require.Equal(t, string(manifests), stdout.String())
	require.Contains(t, stderr.String(), "Secret bursting-root-curve (the CURVE certificate)")
	require.NotContains(t, stdout.String(), "Hostlist:", "no summary in the objects")

	stdout.Reset()
	require.NoError(t, run(context.Background(), []string{"plan", "--filename", example, "--output=json"}, &stdout, &bytes.Buffer{}))
	var list struct {
		APIVersion, Kind string
		Items            []struct{ Kind string }
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &list))
	require.Equal(t, "List", list.Kind)
	var kinds []string
	for _, i := range list.Items {
		kinds = append(kinds, i.Kind)
	}
	require.Equal(t, strings.Count(string(manifests), "\nkind: "), len(kinds))
	require.Contains(t, kinds, "Job")
	require.NotContains(t, kinds, "Secret")

	// The children are for their members: not printed, and stderr says where they are.
	stderr.Reset()
	require.NoError(t, run(context.Background(), []string{"plan", "-f", example, "--lead-address", "127.0.2.10", "-o", "yaml"},
		&bytes.Buffer{}, &stderr))
	require.Contains(t, stderr.String(), "the 2 child MiniClusters belong on their members and are not printed: pass --out DIR")

	err = run(context.Background(), []string{"plan", "-f", example, "-o", "wide"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, `--output "wide" is not one of summary, yaml, json`)
}

// TestPlanWritesAFederation plans the example root with a stand-in lead endpoint: one folder
// per host of the root and of both children, whose brokers fluxcheck finds joining one
// instance across the three clusters.
func TestPlanWritesAFederation(t *testing.T) {
	out := t.TempDir()
	example := filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml")
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-f", example, "--out", out,
		"--lead-address", "127.0.2.10", "--lead-port", "30093"}, &stdout, &bytes.Buffer{}))

	summary := stdout.String()
	for _, want := range []string{
		"Hostlist:  bursting-root-[0-1],burst-a-[0-2],burst-b-[0-1]",
		"Children the hub pushes (their brokers reach rank 0 at 127.0.2.10:30093):",
		"burst-a  member-a  default    3     2-4    127.0.2.10,bursting-root-1,burst-a-[0-2],burst-b-[0-1]",
		"burst-b  member-b  default    2     5-6    127.0.2.10,bursting-root-1,burst-a-[0-2],burst-b-[0-1]",
		"Wrote 7 host folders (2 of the root, 5 of 2 children)",
	} {
		require.Contains(t, summary, want)
	}

	clusters := map[string]string{
		"bursting-root-0": "hub", "bursting-root-1": "hub",
		"burst-a-0": "member-a", "burst-a-1": "member-a", "burst-a-2": "member-a",
		"burst-b-0": "member-b", "burst-b-1": "member-b",
	}
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	var folders []string
	for _, e := range entries {
		if e.IsDir() {
			folders = append(folders, e.Name())
		}
	}
	require.ElementsMatch(t, []string{"bursting-root-0", "bursting-root-1", "burst-a-0", "burst-a-1", "burst-a-2", "burst-b-0", "burst-b-1"}, folders)

	var configs []fluxcheck.HostConfig
	for host, cluster := range clusters {
		read := func(name string) []byte {
			data, err := os.ReadFile(filepath.Join(out, host, name))
			require.NoError(t, err)
			return data
		}
		require.Equal(t, host+"\n", string(read("hostname")))
		hostlist := "bursting-root-[0-1],burst-a-[0-2],burst-b-[0-1]\n"
		if cluster != "hub" {
			hostlist = "127.0.2.10,bursting-root-1,burst-a-[0-2],burst-b-[0-1]\n"
		}
		require.Equal(t, hostlist, string(read("hostlist")), host)
		configs = append(configs, fluxcheck.HostConfig{Hostname: host, BrokerTOML: read("broker.toml"), CurveCert: read("curve.cert"), Cluster: cluster})
	}
	require.NoError(t, fluxcheck.Check(configs))

	children, err := os.ReadFile(filepath.Join(out, "children.yaml"))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(children), "kind: MiniCluster\n"))
	for _, want := range []string{"# member cluster: member-a\n", "name: burst-a\n", "fluxfed.io/origin-name: bursting-root\n",
		"fluxfed.io/origin-hub: fluxfed\n", "address: 127.0.2.10\n", "port: 30093\n"} {
		require.Contains(t, string(children), want)
	}
	require.NotContains(t, string(children), "  cluster: ", "a child's clusters list names no cluster")
	for _, burst := range []string{"burst-a", "burst-b"} {
		manifests, err := os.ReadFile(filepath.Join(out, "manifests-"+burst+".yaml"))
		require.NoError(t, err)
		require.Contains(t, string(manifests), "name: "+burst+"\n")
		require.NotContains(t, string(manifests), "secret-key")
	}
}

func TestPlanWithoutALeadEndpointSaysWhatIsMissing(t *testing.T) {
	example := filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml")
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-f", example}, &stdout, &bytes.Buffer{}))
	require.Contains(t, stdout.String(), "Children:  burst-a (member-a), burst-b (member-b) are not rendered: they need the endpoint")
	require.Contains(t, stdout.String(), "pass --lead-address (and --lead-port)")

	// A root without bursts to push has nothing to say about children, lead endpoint or not.
	reserved := filepath.Join(testenv.RepoRoot(), "examples", "bursting-reserved.yaml")
	for _, args := range [][]string{{}, {"--lead-address", "127.0.2.10"}} {
		stdout.Reset()
		require.NoError(t, run(context.Background(), append([]string{"plan", "-f", reserved}, args...), &stdout, &bytes.Buffer{}))
		require.NotContains(t, stdout.String(), "Children")
	}
}

func TestPlanLeadEndpointErrors(t *testing.T) {
	example := filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml")
	dir := t.TempDir()
	child := filepath.Join(dir, "child.yaml")
	require.NoError(t, os.WriteFile(child, []byte(`apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata: {name: burst-a}
spec:
  size: 3
  containers: [{image: rockylinux:9}]
  flux:
    bursting:
      leadBroker: {address: 127.0.2.10, name: bursting-root, size: 2, port: 30093}
      clusters: [{name: burst-a, size: 3}, {name: burst-b, size: 2}]
`), 0o644))
	brokerConfig := filepath.Join(dir, "broker-config.yaml")
	require.NoError(t, os.WriteFile(brokerConfig, []byte(`apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata: {name: r}
spec:
  size: 1
  containers: [{image: rockylinux:9}]
  flux:
    brokerConfig: "[bootstrap]\n"
    bursting:
      clusters: [{name: x, size: 1, cluster: member-a}]
`), 0o644))

	tests := []struct {
		name string
		args []string
		err  string
	}{
		{name: "port without address", args: []string{"-f", example, "--lead-port", "30093"}, err: "--lead-port needs --lead-address"},
		{name: "port out of range", args: []string{"-f", example, "--lead-address", "127.0.2.10", "--lead-port", "70000"}, err: "--lead-port 70000 is not a TCP port"},
		{name: "IPv6 address", args: []string{"-f", example, "--lead-address", "fd00::1"},
			err: "MiniCluster bursting-root cannot burst: lead broker endpoint fd00::1:8050: the address contains ':'"},
		{name: "address of a burst host", args: []string{"-f", example, "--lead-address", "burst-b-1"},
			err: "the address is also the hostname of rank 6"},
		{name: "a burst child", args: []string{"-f", child, "--lead-address", "127.0.2.10"},
			err: "MiniCluster burst-a is a burst child (spec.flux.bursting.leadBroker is set)"},
		{name: "a federation that cannot work, without an endpoint", args: []string{"-f", brokerConfig},
			err: "MiniCluster r cannot burst: spec.flux.brokerConfig: cannot be combined with bursts that name a cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), append([]string{"plan"}, tt.args...), &bytes.Buffer{}, &bytes.Buffer{})
			require.ErrorContains(t, err, tt.err)
		})
	}

	// A burst child alone still plans as before.
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-f", child}, &stdout, &bytes.Buffer{}))
	require.Contains(t, stdout.String(), "burst child of bursting-root (lead broker 127.0.2.10:30093)")
}

// TestPlanShowsTheReservation plans a root whose bursts reserve more ranks than they run, one
// of them none: the summary says which ranks run, and every reserved rank gets a host folder,
// as it boots when its burst grows.
func TestPlanShowsTheReservation(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "elastic.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata: {name: elastic, namespace: hpc}
spec:
  size: 2
  containers: [{image: rockylinux:9, command: hostname}]
  flux:
    bursting:
      clusters:
      - {name: burst-a, size: 0, maxSize: 3, cluster: member-a}
      - {name: burst-b, size: 1, maxSize: 2, cluster: member-b}
`), 0o644))
	out := t.TempDir()
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-f", manifest, "--out", out,
		"--lead-address", "127.0.2.10", "--lead-port", "30093"}, &stdout, &bytes.Buffer{}))
	summary := stdout.String()
	for _, want := range []string{
		"Hostlist:  elastic-[0-1],burst-a-[0-2],burst-b-[0-1]",
		"RUNNING",
		"2-4    burst-a-[0-2]  burst-a  member-a            none: all reserved",
		"5-6    burst-b-[0-1]  burst-b  member-b            5 ",
		"burst-a  member-a  hpc        0 (not pushed)",
		"Wrote 7 host folders",
	} {
		require.Contains(t, summary, want)
	}
	var configs []fluxcheck.HostConfig
	for _, host := range []string{"elastic-0", "elastic-1", "burst-a-0", "burst-a-1", "burst-a-2", "burst-b-0", "burst-b-1"} {
		read := func(name string) []byte {
			data, err := os.ReadFile(filepath.Join(out, host, name))
			require.NoError(t, err, host)
			return data
		}
		configs = append(configs, fluxcheck.HostConfig{Hostname: host, BrokerTOML: read("broker.toml"), CurveCert: read("curve.cert")})
	}
	require.NoError(t, fluxcheck.Check(configs), "every reserved rank boots into the same instance")
	children, err := os.ReadFile(filepath.Join(out, "children.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(children), "# size 0: the hub pushes nothing until the burst runs brokers")
}

// TestPlanSaysWhereTheYAMLIsBroken: a YAML syntax error is file:line and the parser's message,
// never a dump of the input.
func TestPlanSaysWhereTheYAMLIsBroken(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ manifest, want string }{
		"flow mapping": {"apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: x\nspec:\n  size: 2\n",
			"bad.yaml:3: did not find expected ',' or '}' (not valid YAML)"},
		"indentation": {"apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: x\nspec:\n  size: 2\n   containers: []\n",
			"bad.yaml:7: mapping values are not allowed in this context (not valid YAML)"},
		"not a manifest": {"just text\n",
			"bad.yaml is not a MiniCluster manifest: it has no apiVersion and kind (apiVersion: flux-framework.org/v1alpha2, kind: MiniCluster)"},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, "bad.yaml")
			require.NoError(t, os.WriteFile(file, []byte(tc.manifest), 0o644))
			err := run(context.Background(), []string{"plan", "-f", file}, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			require.Equal(t, filepath.Join(dir, tc.want), err.Error())
		})
	}
}

// TestPlanLeavesOutTheLineWithoutAField: the API server's "<nil>: Invalid value" cause for the
// rules it did not check is a note, not a bullet.
func TestPlanLeavesOutTheLineWithoutAField(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nospec.yaml")
	require.NoError(t, os.WriteFile(file, []byte("apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: x}\nspec: {size: 1}\n"), 0o644))
	err := run(context.Background(), []string{"plan", "-f", file}, &bytes.Buffer{}, &bytes.Buffer{})
	require.Error(t, err)
	require.Equal(t, `MiniCluster "x" is invalid:
  * spec.containers: Required value
  (some validation rules were not checked because of these errors: fix them and plan again)`, err.Error())
}

// TestPlanNamesTheRole: a MiniCluster without bursts is not called a root, and its tree has no
// bursts; a root says how many it has.
func TestPlanNamesTheRole(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain.yaml")
	require.NoError(t, os.WriteFile(file, []byte("apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: x}\nspec:\n  size: 2\n  containers: [{image: rockylinux:9}]\n"), 0o644))
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-f", file}, &stdout, &bytes.Buffer{}))
	require.Contains(t, stdout.String(), "MiniCluster default/x: no bursts\n")
	require.Contains(t, stdout.String(), "Topology:  custom: flat under rank 0\n")
	require.NotContains(t, stdout.String(), "root")
	require.NotContains(t, stdout.String(), "subtree per burst")

	stdout.Reset()
	require.NoError(t, run(context.Background(), []string{"plan", "-f", filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml")}, &stdout, &bytes.Buffer{}))
	require.Contains(t, stdout.String(), "MiniCluster default/bursting-root: root of 2 burst(s)\n")
	require.Contains(t, stdout.String(), "Topology:  custom: flat under rank 0, one subtree per burst\n")
}
