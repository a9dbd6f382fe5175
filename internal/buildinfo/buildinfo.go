// Package buildinfo says which build of fluxfed is running: what the binaries print for
// --version and log when they start.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version returns stamped, the version stamped into the binary at build time (go build -ldflags
// "-X main.version=v0.1.0"), when it is set; else the module version Go recorded (a `go install
// ...@vX` build); else "devel".
func Version(stamped string) string {
	if stamped != "" {
		return stamped
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

// Line is what the binary name prints for its version: "NAME VERSION (GO, OS/ARCH)".
func Line(name, stamped string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", name, Version(stamped), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
