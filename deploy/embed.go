// Package deploy holds the manifests that install fluxfed. Most are applied with kubectl
// (kubectl apply --server-side -k deploy/...); the ones a program applies are embedded here.
package deploy

import "embed"

// MemberAccess holds the kustomizations that give a hub its identity on a member cluster:
// member-access (the least a member needs), member-access-any (the whole member lent) and
// member-access-token (with a token that never expires), each a directory with its
// kustomization.yaml, as `fluxfed member add` applies them.
//
//go:embed member-access member-access-any member-access-token
var MemberAccess embed.FS
