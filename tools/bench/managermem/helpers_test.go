package managermem

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/image"
)

func TestRequestsSumsTheClientCountsOfEveryCodeAndHost(t *testing.T) {
	metrics := strings.Join([]string{
		"# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.",
		"# TYPE rest_client_requests_total counter",
		`rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 12`,
		`rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 50`,
		`rest_client_requests_total{code="409",host="127.0.0.1:6443",method="POST"} 3`,
		`rest_client_requests_total{code="<error>",host="127.0.0.1:6443",method="PATCH"} 1`,
		`rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="GET"} 99`,
		"go_memstats_heap_inuse_bytes 1.2e+07",
	}, "\n") + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(metrics)) }))
	defer srv.Close()

	total, byMethod := requests(t, strings.TrimPrefix(srv.URL, "http://"))
	require.InDelta(t, 66, total, 0)
	require.Equal(t, map[string]float64{"GET": 12, "POST": 53, "PATCH": 1}, byMethod)
}

func TestPercentileIsTheNearestRank(t *testing.T) {
	values := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	require.InDelta(t, 5.0, percentile(values, 50), 0)
	require.InDelta(t, 10.0, percentile(values, 99), 0)
	require.InDelta(t, 1.0, percentile(values, 1), 0)
	require.InDelta(t, 0.0, percentile(nil, 50), 0)
	require.Equal(t, []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}, values, "percentile sorts a copy")
}

func TestObjectsOfNamesWhatEachOperatorMakes(t *testing.T) {
	mc := v1alpha2test.MiniCluster("lammps").Namespace(namespace).Obj()
	require.Equal(t, []string{"jobs/lammps", "services/lammps", "configmaps/lammps-flux-config", "configmaps/lammps-entrypoint"},
		objectsOf(binary{name: "fluxfed"}, mc))
	require.Equal(t, []string{"jobs/lammps", "services/lammps", "configmaps/lammps-entrypoint"},
		objectsOf(binary{name: "fluxoperator", fluxOperator: true}, mc))
}

func TestABurnerEndsWithItsParent(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	// A shell starts a burner and exits at once, as a benchmark that died would.
	out, err := exec.Command("sh", "-c", burnEnv+`=$$ "$0" >/dev/null 2>&1 & echo $!`, self).Output()
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true // gone
		}
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		return len(fields) > 0 && fields[0] == "Z" // exited, not yet reaped by its new parent
	}, 10*time.Second, 50*time.Millisecond, "the burner %d outlived its parent", pid)
}

// TestTheDefaultBinaryIsTheOneTheImageRuns: without -managermem.binaries the benchmark measures
// fluxfed-manager, run with flags only, as deploy/manager runs /fluxfed-manager; fluxfed stays
// selectable, run as `fluxfed manager`.
func TestTheDefaultBinaryIsTheOneTheImageRuns(t *testing.T) {
	def := flag.Lookup("managermem.binaries").DefValue
	require.Equal(t, "fluxfed-manager", def)
	bin := known[def]
	require.Equal(t, "./cmd/fluxfed-manager", bin.pkg)
	require.Equal(t, image.ManagerPath, "/"+bin.name)
	require.Empty(t, bin.args)
	require.Equal(t, binary{name: "fluxfed", pkg: "./cmd/fluxfed", args: []string{"manager"}}, known["fluxfed"])
}
