package chart_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/strvals"

	"github.com/fluxfed/fluxfed/internal/testenv"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of testdata/")

// schemaKeys returns the values the schema names, dotted: the leaves of the objects whose keys
// the chart owns (additionalProperties false), and the objects passed on as they are.
func schemaKeys(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	require.NoError(t, err)
	type node struct {
		Properties           map[string]*node `json:"properties"`
		AdditionalProperties any              `json:"additionalProperties"`
	}
	var root node
	require.NoError(t, json.Unmarshal(data, &root))
	var keys []string
	var walk func(prefix string, n *node)
	walk = func(prefix string, n *node) {
		for k, child := range n.Properties {
			if child.AdditionalProperties == false && len(child.Properties) > 0 {
				walk(prefix+k+".", child)
				continue
			}
			keys = append(keys, prefix+k)
		}
	}
	walk("", &root)
	slices.Sort(keys)
	return slices.DeleteFunc(keys, func(k string) bool { return k == "global" })
}

// The README's table of values names every value of the schema, and nothing else.
func TestChartREADMEListsEveryValue(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(data), "\n## Values\n")
	require.True(t, ok)
	table, _, _ = strings.Cut(table, "\n## ")
	var listed []string
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			listed = append(listed, m[1])
		}
	}
	slices.Sort(listed)
	require.Equal(t, schemaKeys(t), listed, "values.schema.json and the table of README.md")
}

// helmCommands returns the `helm install` and `helm upgrade` commands of a Markdown file, each
// as its arguments, lines continued with a backslash joined and comments dropped.
func helmCommands(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	var out [][]string
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
		if !strings.HasPrefix(line, "helm install ") && !strings.HasPrefix(line, "helm upgrade ") {
			continue
		}
		line, _, _ = strings.Cut(line, " #")
		var args []string
		for _, f := range strings.Fields(line) {
			args = append(args, strings.Trim(f, "'"))
		}
		out = append(out, args)
	}
	return out
}

// Every `helm install` and `helm upgrade` of the chart's README and of docs/install.md names the
// chart of this tree and values the chart takes: rendered as Helm would, with the command's -n
// and --set, they pass, but for the example of a refused value, which fails as the docs show.
func TestDocsHelmCommandsRender(t *testing.T) {
	root := testenv.RepoRoot()
	install, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	require.NoError(t, err)
	n := 0
	for _, doc := range []string{filepath.Join(chartDir, "README.md"), filepath.Join(root, "docs", "install.md")} {
		for _, args := range helmCommands(t, doc) {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				n++
				require.GreaterOrEqual(t, len(args), 4)
				require.Equal(t, "deploy/chart/fluxfed", args[3], "the chart of this tree")
				vals := map[string]any{}
				ns := "default"
				for i := 4; i < len(args); i++ {
					switch a := args[i]; a {
					case "-n":
						i++
						ns = args[i]
					case "--set":
						i++
						require.NoError(t, strvals.ParseInto(args[i], vals))
					case "--create-namespace", "--reuse-values":
					default:
						t.Fatalf("%s: a flag the test does not know: %s", doc, a)
					}
				}
				chrt, err := loader.Load(chartDir)
				require.NoError(t, err)
				in := action.NewInstall(action.NewConfiguration())
				in.DryRunStrategy = action.DryRunClient
				in.ReleaseName = args[2]
				in.Namespace = ns
				in.KubeVersion = kubeVersion(t)
				_, err = in.Run(chrt, vals)
				if slices.Contains(args, "hub.fluxInterval=soon") {
					require.Error(t, err)
					require.Contains(t, string(install), "Error: INSTALLATION FAILED: "+err.Error())
					return
				}
				require.NoError(t, err)
			})
		}
	}
	require.GreaterOrEqual(t, n, 8)
}

// NOTES.txt, as `helm install` prints it, per mode: the next command (testdata/notes-*.txt;
// go test -run TestChartNotes -update rewrites them). The files and flags it names exist.
func TestChartNotes(t *testing.T) {
	root := testenv.RepoRoot()
	memberGo, err := os.ReadFile(filepath.Join(root, "cmd", "fluxfed", "member.go"))
	require.NoError(t, err)
	for name, vals := range map[string]map[string]any{
		"single":                   {},
		"hub":                      {"mode": "hub"},
		"hub-members-elsewhere":    {"mode": "hub", "hub": map[string]any{"membersNamespace": "fleet"}},
		"member":                   {"mode": "member"},
		"member-by-hand":           {"mode": "member", "memberAccess": map[string]any{"enabled": true}},
		"member-by-hand-lending":   {"mode": "member", "memberAccess": map[string]any{"enabled": true, "lentNamespaces": []any{"research"}}},
		"member-by-hand-lends-any": {"mode": "member", "memberAccess": map[string]any{"enabled": true, "profile": "any"}},
	} {
		t.Run(name, func(t *testing.T) {
			chrt, err := loader.Load(chartDir)
			require.NoError(t, err)
			in := action.NewInstall(action.NewConfiguration())
			in.DryRunStrategy = action.DryRunClient
			in.ReleaseName = "fluxfed"
			in.Namespace = namespace
			in.KubeVersion = kubeVersion(t)
			r, err := in.Run(chrt, vals)
			require.NoError(t, err)
			rel, ok := r.(*releasev1.Release)
			require.True(t, ok)
			notes := rel.Info.Notes + "\n"
			golden := filepath.Join("testdata", "notes-"+name+".txt")
			if *updateGolden {
				require.NoError(t, os.MkdirAll("testdata", 0o755))
				require.NoError(t, os.WriteFile(golden, []byte(notes), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "go test -run TestChartNotes -update")
			require.Equal(t, string(want), notes)

			for _, m := range regexp.MustCompile(`examples/[a-z-]+\.yaml`).FindAllString(notes, -1) {
				require.FileExists(t, filepath.Join(root, m))
			}
			for line := range strings.SplitSeq(notes, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "fluxfed member add ") {
					continue
				}
				for _, f := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(line, -1) {
					require.Contains(t, string(memberGo), `"`+f[1]+`"`, "fluxfed member add has no flag --%s", f[1])
				}
			}
		})
	}
}
