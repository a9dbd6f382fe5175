package scripts

import (
	"fmt"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/member/render/brokerconf"
)

// The representative MiniClusters of the golden tests are v1alpha2test's render cases, which
// package workload renders too, so that the two sets of golden files describe the same pods.

// fixture is one MiniCluster and the inputs the caller would compute for it.
type fixture struct {
	name string
	mc   *fluxv1alpha2.MiniCluster
	in   Inputs
}

// fixtures returns v1alpha2test's render cases with the inputs render.Render computes for them.
func fixtures() []fixture {
	var out []fixture
	for _, c := range v1alpha2test.RenderCases() {
		layout, err := bursting.NewLayout(c.MiniCluster)
		if err != nil {
			panic(fmt.Sprintf("fixture %s has no layout: %v", c.Name, err))
		}
		in := Inputs{
			Hostlist: layout.Hostlist, Quorum: layout.Quorum, Follower: c.MiniCluster.IsBurstChild(),
			ResourcesFromConfig: brokerconf.ResourcesFromConfig(c.MiniCluster, layout),
		}
		if c.Name == "pod-options" {
			// render.Render passes no TBON topology, but the scripts must render one when asked.
			in.TBONTopo = "kary:2"
		}
		out = append(out, fixture{name: c.Name, mc: c.MiniCluster, in: in})
		if c.Name == "burst-child" {
			// The same child when broker.toml describes every group's hardware.
			in.ResourcesFromConfig = true
			out = append(out, fixture{name: c.Name + "-resource-config", mc: c.MiniCluster, in: in})
		}
	}
	return out
}
