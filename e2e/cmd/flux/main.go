// Command flux is the stand-in flux of the e2e clusters (e2e/fluxsim): kwok runs it for the
// commands the hub runs in a lead broker's container, on the instance that $FLUXFED_FLUXSIM
// names.
package main

import (
	"os"

	"github.com/fluxfed/fluxfed/e2e/fluxsim"
)

func main() {
	os.Exit(fluxsim.Main(os.Getenv(fluxsim.EnvDir), os.Args[1:], os.Stdout, os.Stderr))
}
