package workload

import (
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/rendertest"
)

// The representative MiniClusters of the golden tests are rendertest's, which package scripts
// renders too, so that the two sets of golden files describe the same pods.

// fixture is one MiniCluster (package scripts' fixtures also carry the scripts' inputs).
type fixture struct {
	name string
	mc   *fluxv1alpha2.MiniCluster
}

func fixtures() []fixture {
	var out []fixture
	for _, c := range rendertest.Cases() {
		out = append(out, fixture{name: c.Name, mc: c.MiniCluster})
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
