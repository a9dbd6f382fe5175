package testenv

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestCreateAllCreatesEveryObject(t *testing.T) {
	env := Shared(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "create-all-"}}
	require.NoError(t, env.Client.Create(context.Background(), ns))
	cms := make([]*corev1.ConfigMap, 25)
	for i := range cms {
		cms[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: fmt.Sprintf("cm-%02d", i)}}
	}
	CreateAll(t, env.Client, cms)
	var list corev1.ConfigMapList
	require.NoError(t, env.Client.List(context.Background(), &list, client.InNamespace(ns.Name)))
	var names []string
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			names = append(names, cm.Name)
		}
	}
	require.Len(t, names, 25)
}
