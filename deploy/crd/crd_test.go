package crd_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/deploy/crd"
)

func TestMiniClustersDecodes(t *testing.T) {
	var def apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict(crd.MiniClusters, &def))

	require.Equal(t, "miniclusters.flux-framework.org", def.Name)
	require.Equal(t, fluxv1alpha2.GroupVersion.Group, def.Spec.Group)
	require.Equal(t, "MiniCluster", def.Spec.Names.Kind)
	require.Len(t, def.Spec.Versions, 1)
	v := def.Spec.Versions[0]
	require.Equal(t, fluxv1alpha2.GroupVersion.Version, v.Name)
	require.True(t, v.Served)
	require.True(t, v.Storage)
	require.NotNil(t, v.Schema)
	require.NotNil(t, v.Schema.OpenAPIV3Schema)
	require.Contains(t, v.Schema.OpenAPIV3Schema.Properties, "spec")
}
