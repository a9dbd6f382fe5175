package buildinfo_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	require.Equal(t, "v0.1.0", buildinfo.Version("v0.1.0"), "a stamped version is the version")
	// A test binary records no module version: unstamped, it is a development build.
	require.Equal(t, "devel", buildinfo.Version(""))
}

func TestLine(t *testing.T) {
	require.Equal(t, "fluxfed-manager v0.1.0 ("+runtime.Version()+", "+runtime.GOOS+"/"+runtime.GOARCH+")",
		buildinfo.Line("fluxfed-manager", "v0.1.0"))
	require.Equal(t, "fluxfed devel ("+runtime.Version()+", "+runtime.GOOS+"/"+runtime.GOARCH+")", buildinfo.Line("fluxfed", ""))
}
