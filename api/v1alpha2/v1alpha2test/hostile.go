package v1alpha2test

import (
	"fmt"
	"strings"
	"unicode"
)

// CanaryVar is the environment variable that hostile values name in their attempts to run a
// command ("touch $FLUXFED_CANARY"): a test that runs the rendered scripts sets it to a file in
// its temporary directory and fails if the file appears.
const CanaryVar = "FLUXFED_CANARY"

// HostileCase is a MiniCluster spec with a hostile value in a field that reaches a script, a
// configuration file or the pod, and what fluxfed does with it: the API server refuses it with a
// cause at Field that says Message, or, when Field is empty, the spec is accepted as it is and
// the renderers must make the value safe (package scripts runs the rendered scripts of every
// accepted case and checks that nothing the spec did not ask for was executed).
type HostileCase struct {
	Name string
	// Spec is the YAML of the spec.
	Spec string
	// Field and Message are the cause of the refusal; both empty when the spec is accepted.
	Field   string
	Message string
	// Reconcile, for an accepted spec, is part of the error the renderers give: the member
	// refuses it at reconcile time (condition InvalidSpec) instead of rendering it.
	Reconcile string
}

// Accepted reports whether the API server stores the case's spec.
func (c HostileCase) Accepted() bool { return c.Field == "" }

// ObjectName returns the case's metadata.name: its Name with dashes for spaces.
func (c HostileCase) ObjectName() string {
	return "hostile-" + strings.NewReplacer(" ", "-", "(", "", ")", "", "'", "", ".", "", ",", "").Replace(strings.ToLower(c.Name))
}

// yq returns s as a YAML double-quoted scalar, every control character and every white space
// but the plain space escaped, so that each survives the trip through the YAML of a case (YAML
// reads a raw NEL or line separator as a line break, for one).
func yq(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.IsSpace(r) && r != ' ':
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// canary is a command line that creates the canary file.
const canary = `touch "$` + CanaryVar + `"`

// blanklessCanary is canary without a blank, for fields that refuse white space: the shell's
// ${IFS} stands for the space.
const blanklessCanary = `touch${IFS}"$` + CanaryVar + `"`

// HostileSpecs returns the hostile specs: paths with control and formatting characters, relative
// paths, '..', shell syntax, huge values and names that try to end a quote, a comment or a
// here-document early.
func HostileSpecs() []HostileCase {
	mountPath := func(p string) string { return OneContainer + "flux:\n  container: {mountPath: " + yq(p) + "}\n" }
	container := func(key, value string) string {
		return "containers:\n- image: rockylinux:9\n  command: hostname\n  " + key + ": " + yq(value) + "\n"
	}
	volume := func(key, value string) string {
		entry := "claimName: data, path: " + yq(value)
		if key != "path" {
			entry = "claimName: data, path: /data, " + key + ": " + yq(value)
		}
		return "containers:\n- image: rockylinux:9\n  command: hostname\n  volumes:\n    data: {" + entry + "}\n"
	}
	flux := func(key, value string) string { return OneContainer + "flux:\n  " + key + ": " + yq(value) + "\n" }
	fluxView := func(key, value string) string {
		return OneContainer + "flux:\n  container: {" + key + ": " + yq(value) + "}\n"
	}
	archive := func(p string) string { return OneContainer + "archive: {path: " + yq(p) + "}\n" }
	env := func(name, value string) string {
		return OneContainer + "flux:\n  environment: {" + yq(name) + ": " + yq(value) + "}\n"
	}
	commands := func(key, value string) string {
		return "containers:\n- image: rockylinux:9\n  commands: {" + key + ": " + yq(value) + "}\n"
	}

	const (
		absolute = "must be an absolute path (starting with /) of printable characters"
		blank    = "printable characters other than white space"
		mount    = "spec.flux.container.mountPath"
		tooLong  = "Too long: may not be more than 4096 bytes"
	)
	huge := "/" + strings.Repeat("a", 5000)
	return []HostileCase{
		// The mount path of the flux view reaches every script, broker.toml and the pod.
		{Name: "mountPath newline then a command", Spec: mountPath("/mnt/flux\n" + canary), Field: mount, Message: absolute},
		{Name: "mountPath carriage return", Spec: mountPath("/mnt/flux\r" + canary), Field: mount, Message: absolute},
		{Name: "mountPath tab", Spec: mountPath("/mnt/\tflux"), Field: mount, Message: blank},
		// Flux's rc1 loads crontabs from a directory under the mount path with a shell command
		// that splits the path at white space: no kind of blank is accepted.
		{Name: "mountPath space", Spec: mountPath("/mnt/flux view"), Field: mount, Message: blank},
		{Name: "mountPath trailing space", Spec: mountPath("/mnt/flux "), Field: mount, Message: blank},
		{Name: "mountPath space then a command", Spec: mountPath("/mnt/a; " + canary), Field: mount, Message: blank},
		{Name: "mountPath no-break space", Spec: mountPath("/mnt/flux\u00a0view"), Field: mount, Message: blank},
		{Name: "mountPath narrow no-break space", Spec: mountPath("/mnt/flux\u202fview"), Field: mount, Message: blank},
		{Name: "mountPath em space", Spec: mountPath("/mnt/flux\u2003view"), Field: mount, Message: blank},
		{Name: "mountPath ogham space mark", Spec: mountPath("/mnt/flux\u1680view"), Field: mount, Message: blank},
		{Name: "mountPath ideographic space", Spec: mountPath("/mnt/flux\u3000view"), Field: mount, Message: blank},
		{Name: "mountPath paragraph separator", Spec: mountPath("/mnt/flux\u2029view"), Field: mount, Message: blank},
		{Name: "mountPath NUL", Spec: mountPath("/mnt/flux\x00" + canary), Field: mount, Message: absolute},
		{Name: "mountPath escape character", Spec: mountPath("/mnt/\x1b[2Jflux"), Field: mount, Message: absolute},
		{Name: "mountPath DEL", Spec: mountPath("/mnt/flux\x7f"), Field: mount, Message: absolute},
		{Name: "mountPath C1 control", Spec: mountPath("/mnt/flux\u0085x"), Field: mount, Message: absolute},
		{Name: "mountPath right-to-left override", Spec: mountPath("/mnt/\u202eflux"), Field: mount, Message: absolute},
		{Name: "mountPath zero width space", Spec: mountPath("/mnt/fl\u200bux"), Field: mount, Message: absolute},
		{Name: "mountPath line separator", Spec: mountPath("/mnt/flux\u2028" + canary), Field: mount, Message: absolute},
		{Name: "mountPath relative", Spec: mountPath("mnt/flux"), Field: mount, Message: absolute},
		{Name: "mountPath dot dot", Spec: mountPath("/mnt/../etc"), Field: mount, Message: "no .. elements"},
		{Name: "mountPath root", Spec: mountPath("/"), Field: mount, Message: "/ alone is not allowed"},
		{Name: "mountPath comma", Spec: mountPath("/mnt/a,b"), Field: mount, Message: "no commas"},
		{Name: "mountPath huge", Spec: mountPath(huge), Field: mount, Message: tooLong},
		{Name: "mountPath command substitution", Spec: mountPath("/mnt/$(" + blanklessCanary + ")")},
		{Name: "mountPath backticks", Spec: mountPath("/mnt/`" + blanklessCanary + "`")},
		{Name: "mountPath single quotes", Spec: mountPath("/mnt/it's';" + blanklessCanary + ";'")},
		{Name: "mountPath double quotes and semicolons", Spec: mountPath(`/mnt/";` + blanklessCanary + `;"`)},
		{Name: "mountPath glob and variables", Spec: mountPath("/mnt/*/$HOME/${PATH}/~")},
		{Name: "mountPath unicode letters", Spec: mountPath("/mnt/flüx/データ")},
		{Name: "mountPath dots dashes and underscores", Spec: mountPath("/mnt/.flux-view_1.2/x..y/")},
		{Name: "mountPath heredoc delimiter", Spec: mountPath("/mnt/FLUXFED_SCRIPT_EOF")},

		// Other paths of the flux view's init container.
		{Name: "flux workingDir newline", Spec: fluxView("workingDir", "/tmp\n"+canary), Field: "spec.flux.container.workingDir", Message: absolute},
		{Name: "flux workingDir dot dot", Spec: fluxView("workingDir", "/tmp/.."), Field: "spec.flux.container.workingDir", Message: "no .. elements"},
		{Name: "pythonPath newline", Spec: fluxView("pythonPath", "/mnt/flux/lib\n"+canary), Field: "spec.flux.container.pythonPath", Message: "must be absolute paths"},
		{Name: "pythonPath relative entry", Spec: fluxView("pythonPath", "/mnt/flux/lib:lib"), Field: "spec.flux.container.pythonPath", Message: "must be absolute paths"},
		{Name: "pythonPath shell syntax", Spec: fluxView("pythonPath", "/mnt/flux/lib:/$("+canary+")'`x`")},

		// Paths of the containers.
		{Name: "workingDir newline", Spec: container("workingDir", "/opt\n"+canary), Field: "spec.containers[0].workingDir", Message: absolute},
		{Name: "workingDir relative", Spec: container("workingDir", "opt/app"), Field: "spec.containers[0].workingDir", Message: absolute},
		{Name: "workingDir NUL", Spec: container("workingDir", "/opt\x00"), Field: "spec.containers[0].workingDir", Message: absolute},
		{Name: "logs newline", Spec: container("logs", "/tmp/out\n"+canary), Field: "spec.containers[0].logs", Message: absolute},
		{Name: "logs relative", Spec: container("logs", "out"), Field: "spec.containers[0].logs", Message: absolute},
		{Name: "logs shell syntax", Spec: container("logs", "/tmp/$("+canary+")`"+canary+"`';\"")},
		{Name: "volume path newline", Spec: volume("path", "/data\n"+canary), Field: "spec.containers[0].volumes.data.path", Message: "should match"},
		{Name: "volume path dot dot", Spec: volume("path", "/data/../../etc"), Field: "spec.containers[0].volumes.data.path", Message: "should match"},
		{Name: "volume hostPath relative", Spec: volume("hostPath", "var/tmp"), Field: "spec.containers[0].volumes.data.hostPath", Message: "should match"},
		{Name: "volume hostPath right-to-left override", Spec: volume("hostPath", "/var/\u202etmp"), Field: "spec.containers[0].volumes.data.hostPath", Message: "should match"},

		// The archive reaches the lead broker's options and a shell test.
		{Name: "archive newline", Spec: archive("/state/a.tar\n" + canary), Field: "spec.archive.path", Message: absolute},
		{Name: "archive comma", Spec: archive("/state/a.tar,-Sbroker.rc1_path=/x"), Field: "spec.archive.path", Message: "no commas"},
		{Name: "archive relative", Spec: archive("state/a.tar"), Field: "spec.archive.path", Message: absolute},
		{Name: "archive shell syntax", Spec: archive("/state/$(" + canary + ");'\"`x`.tar")},

		// Environment of the Flux processes: names become shell variables, values are quoted.
		{Name: "environment name with a command", Spec: env("A=1; "+canary+"; B", "x"), Field: "spec.flux.environment", Message: "every name must be a shell variable name"},
		{Name: "environment name with a newline", Spec: env("A\nB", "x"), Field: "spec.flux.environment", Message: "every name must be a shell variable name"},
		{Name: "environment name reserved", Spec: env("fluxfed_viewbase", "/"), Field: "spec.flux.environment", Message: "must not start with fluxfed_"},
		{Name: "environment value with commands", Spec: env("APP_VALUE", "'$("+canary+")`"+canary+"`\n"+canary+"; \"")},
		{Name: "environment value with a right-to-left override", Spec: env("APP_VALUE", "abc\u202edef")},

		// Flux settings passed to flux start or written to broker.toml.
		{Name: "wrap with commands", Spec: flux("wrap", "strace,$("+canary+"),`"+canary+"`")},
		{Name: "connectTimeout newline", Spec: flux("connectTimeout", "5s\n"+canary), Field: "spec.flux.connectTimeout", Message: "should match"},
		{Name: "topology breaking TOML", Spec: flux("topology", "kary:2\"\n[bootstrap]\ncurve_cert = \"/tmp/x")},
		{Name: "optionFlags with commands", Spec: flux("optionFlags", "-o x=$("+canary+") ; "+canary)},
		{Name: "submitCommand with commands", Spec: flux("submitCommand", "flux submit; "+canary+" `"+canary+"`")},
		{Name: "optionFlags unterminated quote", Spec: flux("optionFlags", "-o 'x"), Reconcile: "spec.flux.optionFlags"},
		{Name: "leadBroker address with quotes", Spec: OneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, size: 1, address: " + yq("a\"b") + "}\n", Field: "spec.flux.bursting.leadBroker.address", Message: "should match"},

		// Names reach comments and file names of the scripts.
		{Name: "container name with a newline", Spec: "containers:\n- {image: a, name: " + yq("app\n"+canary) + "}\n", Field: "spec.containers[0].name", Message: "should match"},
		{Name: "service name with shell syntax", Spec: OneContainer + "services:\n- {image: a, name: " + yq("web;$(x)") + ", command: x}\n", Field: "spec.services[0].name", Message: "should match"},
		{Name: "flux view name with quotes", Spec: fluxView("name", "view\"'"), Field: "spec.flux.container.name", Message: "should match"},

		// Snippets are code by design: they run, but cannot break out of their place.
		{Name: "script ends its here-document", Spec: commands("script", "echo job\nFLUXFED_SCRIPT_EOF\n"+canary+"\nFLUXFED_SCRIPT_EOF\n")},
		{Name: "prefix with commands", Spec: commands("prefix", "env X=$("+canary+") `"+canary+"`")},
		{Name: "prefix unterminated quote", Spec: commands("prefix", "\"env"), Reconcile: "commands.prefix"},
	}
}
