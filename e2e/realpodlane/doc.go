// Package realpodlane is the real-pod lane of the end-to-end tests: fluxfed's MiniClusters and
// its federation on local clusters whose nodes are real (e2e/clusters Options.RealNodes), where
// the kubelet runs the pods the member reconciler renders in the images of e2e/realpods: the
// flux-view init container copies the view, the rendered entrypoint starts a real broker, the
// brokers find each other through the headless Service and the cluster's CoreDNS, and the kubelet
// reports exit codes and termination messages, restarts containers and kills them at their grace
// period.
//
// Its tests carry the build tag realpods, as e2e/realpods' do: they need root, containerd, runc,
// the CNI plugins (make real-pod-deps), the images (make real-pod-images), the kubelet and CoreDNS
// (make k8s-binaries) and a network namespace with only loopback (e2e/cmd/loopback). make test
// provides all of that and runs them:
//
//	make real-pod-deps real-pod-images k8s-binaries
//	KUBEBUILDER_ASSETS=$HOME/.cache/fluxfed/k8s/v1.36.3 ~/.cache/fluxfed/tools/loopback \
//		go test -tags realpods ./e2e/realpodlane -count=1 -timeout 40m -v
//
// The lane is a package of its own rather than more tests in e2e/realpods: make test gives every
// package a timeout of its own (TEST_TIMEOUTS), and the lane's minutes should not share one with
// the images' quick checks; e2e/realpods stays the small library of names, archives and imports
// that e2e/clusters' tests use too.
package realpodlane
