// Package member is the MiniCluster reconciler: it runs on every cluster, in single-cluster mode
// and on each member of a federation, and turns a MiniCluster into its CURVE Secret, ConfigMaps,
// headless Service and indexed Job, rendered by the pure builders in member/render and applied
// with server-side apply. It reports the MiniCluster's Ready, Complete and Failed conditions.
package member
