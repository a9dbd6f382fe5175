package clusters

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// kwokExecs is kwok's Exec resource, which local clusters install (kwok-exec-crd.yaml).
var kwokExecs = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "execs"}

// ExecLocally makes `kubectl exec` into the pod namespace/name of a local cluster run the command
// on this machine, as the user that runs the cluster, in dir, with env added to that user's
// environment: kwok's server, the nodes' kubelet endpoint, runs it. It applies to every container
// of the pod. The pod need not exist yet; the rule is replaced when it exists.
func (c *Cluster) ExecLocally(ctx context.Context, namespace, name, dir string, env map[string]string) error {
	if c.KindName != "" {
		return fmt.Errorf("cluster %s runs real containers: exec runs in them, not on this machine", c.Name)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var envs []any
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envs = append(envs, map[string]any{"name": k, "value": env[k]})
	}
	local := map[string]any{"envs": envs}
	if dir != "" {
		local["workDir"] = dir
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kwokExecs.GroupVersion().String(),
		"kind":       "Exec",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{"execs": []any{map[string]any{"local": local}}},
	}}
	execs := dyn.Resource(kwokExecs).Namespace(namespace)
	_, err = execs.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var old *unstructured.Unstructured
		if old, err = execs.Get(ctx, name, metav1.GetOptions{}); err == nil {
			obj.SetResourceVersion(old.GetResourceVersion())
			_, err = execs.Update(ctx, obj, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("cluster %s: the exec rule of pod %s/%s: %w", c.Name, namespace, name, err)
	}
	return nil
}

// kwokLogs is kwok's Logs resource, which local clusters install (kwok-logs-crd.yaml).
var kwokLogs = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// LogsLocally makes `kubectl logs` of every container of the pod namespace/name of a local
// cluster print the file at path on this machine (kwok's server reads it), following it when
// follow is set. The pod need not exist yet.
func (c *Cluster) LogsLocally(ctx context.Context, namespace, name, path string, follow bool) error {
	if c.KindName != "" {
		return fmt.Errorf("cluster %s runs real containers: their logs are theirs", c.Name)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kwokLogs.GroupVersion().String(),
		"kind":       "Logs",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{"logs": []any{map[string]any{"logsFile": path, "follow": follow}}},
	}}
	if _, err := dyn.Resource(kwokLogs).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster %s: the logs rule of pod %s/%s: %w", c.Name, namespace, name, err)
	}
	return nil
}
