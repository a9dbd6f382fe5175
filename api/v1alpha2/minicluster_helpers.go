package v1alpha2

// MaxSize returns the number of brokers the MiniCluster's own part of the Flux instance has room
// for: spec.maxSize when it is set and larger than spec.size, spec.size otherwise. The hostlist
// reserves this many hosts for it; the indexed Job runs spec.size of them. It assumes the schema defaults were applied
// (spec.size is at least 1 in any stored object).
func (mc *MiniCluster) MaxSize() int32 {
	if mc.Spec.MaxSize > mc.Spec.Size {
		return mc.Spec.MaxSize
	}
	return mc.Spec.Size
}

// IsBurstChild reports whether the MiniCluster joins another MiniCluster's Flux instance
// (spec.flux.bursting.leadBroker is set) instead of leading its own.
func (mc *MiniCluster) IsBurstChild() bool {
	return mc.Spec.Flux.Bursting.LeadBroker != nil
}

// FluxContainer returns the container that runs Flux: the only container when there is one,
// otherwise the first with runFlux set. It returns nil when no container qualifies, which the
// schema does not admit. The result points into mc.Spec.Containers.
func (mc *MiniCluster) FluxContainer() *Container {
	containers := mc.Spec.Containers
	if len(containers) == 1 {
		return &containers[0]
	}
	for i := range containers {
		if containers[i].RunFlux {
			return &containers[i]
		}
	}
	return nil
}

// HeadlessName returns the name of the MiniCluster's headless Service: spec.network.headlessName,
// or the MiniCluster's own name when it is unset.
func (mc *MiniCluster) HeadlessName() string {
	if mc.Spec.Network.HeadlessName != "" {
		return mc.Spec.Network.HeadlessName
	}
	return mc.Name
}

// DefaultBackoffLimit replaces a spec.backoffLimit of 0, which cannot be told apart from unset;
// it is the Flux Operator's default. A broker that cannot reach its parent yet exits and is
// restarted, so a MiniCluster needs room for several failures while it starts.
const DefaultBackoffLimit = 100

// BackoffLimit returns spec.backoffLimit, or DefaultBackoffLimit when it is 0: the Job's
// backoffLimit, and how many times the lead broker starts again after a crash.
func (mc *MiniCluster) BackoffLimit() int32 {
	if mc.Spec.BackoffLimit > 0 {
		return mc.Spec.BackoffLimit
	}
	return DefaultBackoffLimit
}
