package v1alpha2

// Label and annotation keys that fluxfed puts on the objects it manages.
const (
	// LabelMiniCluster is set on every pod (and the other objects) of a MiniCluster, with the
	// MiniCluster's name as value. The scale subresource's status.selector uses it.
	LabelMiniCluster = "fluxfed.io/minicluster"

	// LabelOriginHub is set on every object the hub creates on a member cluster (child
	// MiniClusters, their namespaces and CURVE Secrets). Its value identifies the hub, so that
	// several hubs can share a member without touching each other's objects.
	LabelOriginHub = "fluxfed.io/origin-hub"

	// LabelOriginNamespace is set with LabelOriginHub; its value is the namespace of the root
	// MiniCluster on the hub.
	LabelOriginNamespace = "fluxfed.io/origin-namespace"

	// LabelOriginName is set with LabelOriginHub; its value is the name of the root MiniCluster.
	LabelOriginName = "fluxfed.io/origin-name"

	// AnnotationOriginUID is set with LabelOriginHub; its value is the UID of the root
	// MiniCluster. Owner references do not cross clusters: the origin marks name the root, and
	// AnnotationProof proves that the hub wrote them.
	AnnotationOriginUID = "fluxfed.io/origin-uid"

	// AnnotationProof is set with LabelOriginHub on every object the hub creates on a member:
	// a keyed hash (HMAC-SHA256) of the hub, the member, the object's kind, namespace and name,
	// and the root's namespace, name and UID, under a key that only the hub holds. Labels and
	// annotations can be copied by anyone who may write an object; this value can be made only
	// by the hub, and it is sent in the create request, so an object the hub created carries its
	// proof from its first moment, whatever reply is lost or whenever the hub dies. The hub
	// changes or deletes on a member only an object whose proof it verifies.
	AnnotationProof = "fluxfed.io/proof"

	// AnnotationAppliedHash records, on every object fluxfed applies (by the member reconciler,
	// or by the hub on a member), a hash of what was applied. When the cached object carries the
	// hash of the desired state, the apply is skipped: an unchanged object costs no request at
	// all, not even a no-op patch.
	AnnotationAppliedHash = "fluxfed.io/applied-hash"
)

// Field managers of fluxfed's server-side apply requests.
const (
	// FieldOwnerMember is the field manager of the MiniCluster reconciler, which runs in every
	// mode and renders a MiniCluster's own Job, Services, ConfigMaps and Secret.
	FieldOwnerMember = "fluxfed-member"

	// FieldOwnerHub is the field manager of the hub reconciler, which exposes the lead broker
	// and applies child MiniClusters and their Secrets to member clusters.
	FieldOwnerHub = "fluxfed-hub"

	// FieldOwnerCLI is the field manager of `fluxfed member add`, which applies the hub's
	// identity to a member and registers the member on the hub. The chart recognises what it
	// installed by this name.
	FieldOwnerCLI = "fluxfed-cli"
)

// FinalizerBursts is put on a root MiniCluster by the hub while it has children on member
// clusters, so that deleting the root first deletes them there.
const FinalizerBursts = "fluxfed.io/bursts"

// Condition types of a MiniCluster. All have positive polarity: True is the state the name
// describes.
const (
	// ConditionReady is True when all size broker pods of this MiniCluster are running and
	// ready.
	ConditionReady = "Ready"

	// ConditionComplete is True when the indexed Job finished successfully: the lead broker's
	// work is done.
	ConditionComplete = "Complete"

	// ConditionFailed is True when the MiniCluster cannot make progress without a change: its
	// Job failed, or an object could not be applied.
	ConditionFailed = "Failed"

	// ConditionBursting is True when every burst that names a member cluster has been applied
	// there. Only set on a root MiniCluster with such bursts.
	ConditionBursting = "Bursting"

	// ConditionBurstsReady is True when every burst that names a member cluster reports all of
	// its brokers ready.
	ConditionBurstsReady = "BurstsReady"

	// ConditionLeadBrokerReachable is True when the lead broker is exposed and its address is
	// known, so bursts can be told where to connect.
	ConditionLeadBrokerReachable = "LeadBrokerReachable"
)

// Reasons of MiniCluster conditions, in CamelCase as metav1.Condition requires.
const (
	// ReasonPodsReady (Ready=True): every broker pod is running and ready.
	ReasonPodsReady = "PodsReady"
	// ReasonPodsNotReady (Ready=False): some broker pods are missing, pending or not ready.
	ReasonPodsNotReady = "PodsNotReady"

	// ReasonJobComplete (Complete=True): the indexed Job completed.
	ReasonJobComplete = "JobComplete"
	// ReasonJobRunning (Complete=False, Failed=False): the indexed Job has not finished.
	ReasonJobRunning = "JobRunning"
	// ReasonJobFailed (Failed=True): the indexed Job failed; the message carries the Job's
	// own reason.
	ReasonJobFailed = "JobFailed"
	// ReasonApplyFailed (Failed=True, Bursting=False): the API server rejected an object
	// fluxfed applied.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonInvalidSpec (Failed=True): the spec passed the schema but cannot be rendered into a
	// working Flux instance; the message names the field and what is allowed.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonImmutableFieldChanged (Failed=True): a spec change needs a field that cannot be
	// updated in place, such as the Job's pod template; recreate the MiniCluster to apply it.
	ReasonImmutableFieldChanged = "ImmutableFieldChanged"
	// ReasonConflict (Failed=True, or a burst Failed): an object fluxfed would create or change
	// exists and is not fluxfed's; fluxfed never modifies or deletes it. The message names it.
	ReasonConflict = "Conflict"

	// ReasonBurstsApplied (Bursting=True): every burst is applied to its member.
	ReasonBurstsApplied = "BurstsApplied"
	// ReasonBurstsPending (Bursting=False): some bursts are not applied yet, for example while
	// the lead broker's address is unknown.
	ReasonBurstsPending = "BurstsPending"
	// ReasonMemberNotFound (Bursting=False): a burst names a cluster that no MemberCluster
	// registers on the hub.
	ReasonMemberNotFound = "MemberNotFound"
	// ReasonMemberUnreachable (Bursting=False, BurstsReady=False): a member cluster did not
	// answer; the message names it. Its children are kept, and re-synced when it answers again.
	ReasonMemberUnreachable = "MemberUnreachable"
	// ReasonKubeconfigRefused (Bursting=False): the member's kubeconfig Secret asks for something
	// the hub does not run (an exec plugin, credential files, insecure TLS, ...); the message
	// says what.
	ReasonKubeconfigRefused = "KubeconfigRefused"
	// ReasonMemberNotReady (Bursting=False): the burst's MemberCluster is not Ready for another
	// reason than being unreachable (its kubeconfig Secret is missing, its credentials are
	// refused, ...); the message quotes the MemberCluster's condition.
	ReasonMemberNotReady = "MemberNotReady"
	// ReasonDuplicateCluster (Bursting=False): the burst names a MemberCluster whose cluster is
	// already registered under another name; the hub never uses the second registration.
	ReasonDuplicateCluster = "DuplicateCluster"
	// ReasonInvalidFederation (Bursting=False): the bursts cannot be planned, for example
	// because the hostlist would not fit Flux's rules.
	ReasonInvalidFederation = "InvalidFederation"
	// ReasonNamespaceNotAllowed (Bursting=False, the burst Failed): the burst's MemberCluster
	// does not let roots burst into the burst's namespace (spec.namespaces), or does not let the
	// hub create it; nothing is pushed. The message says which namespaces are allowed.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonPodSecurityViolation (Bursting=False, the burst Failed): the child's pods do not meet
	// the Pod Security level of the burst's MemberCluster (spec.podSecurity.level); nothing is
	// pushed. The message names the checks the pods fail.
	ReasonPodSecurityViolation = "PodSecurityViolation"

	// ReasonAllBurstsReady (BurstsReady=True): every burst reports all of its brokers ready.
	ReasonAllBurstsReady = "AllBurstsReady"
	// ReasonBurstsNotReady (BurstsReady=False): some bursts have brokers that are not ready.
	ReasonBurstsNotReady = "BurstsNotReady"

	// ReasonAddressAssigned (LeadBrokerReachable=True): the lead broker's Service has an
	// address the bursts can dial.
	ReasonAddressAssigned = "AddressAssigned"
	// ReasonAddressOverridden (LeadBrokerReachable=True): spec.flux.bursting.expose.address is
	// advertised as given.
	ReasonAddressOverridden = "AddressOverridden"
	// ReasonAddressPending (LeadBrokerReachable=False): the Service exists but has no usable
	// address yet (no node address, or the load balancer is not provisioned).
	ReasonAddressPending = "AddressPending"
	// ReasonNotAnswering (LeadBrokerReachable=False): the advertised endpoint did not answer the
	// hub's ZMTP CURVE greeting. The bursts are pushed anyway (their brokers retry), but an
	// address no member can reach shows here.
	ReasonNotAnswering = "NotAnswering"

	// ReasonCurveSecretPending (Ready=False, on a child): the child waits for the hub to push its
	// root's CURVE Secret. A child never generates a certificate of its own: its brokers must
	// present the root's.
	ReasonCurveSecretPending = "CurveSecretPending"

	// ReasonEarlierObjectsPending (Ready=False): an object of this MiniCluster's is in the way of
	// one that an earlier MiniCluster of the same name controlled. That one is gone, so the
	// garbage collector deletes what it controlled; this MiniCluster's object is created then.
	// Nothing failed, and nothing is someone else's.
	ReasonEarlierObjectsPending = "EarlierObjectsPending"
)

// Reasons of the events fluxfed records on a MiniCluster besides those of its conditions, whose
// moves are recorded with the condition's reason (the action is the condition type).
const (
	// EventCurveSecretRegenerated (Warning, member): the MiniCluster's CURVE Secret was deleted
	// while its brokers ran, and a new certificate was generated; brokers started before hold
	// the old one.
	EventCurveSecretRegenerated = "CurveSecretRegenerated"

	// EventBurstRemoved (hub): a child was deleted because its burst left the member (the
	// burst's cluster or namespace changed, or it was scaled to 0).
	EventBurstRemoved = "BurstRemoved"
	// EventLeadBrokerMoved (hub): rank 0 moved, and the children were given its new endpoint.
	EventLeadBrokerMoved = "LeadBrokerMoved"
	// EventBurstScaledUp (hub): the hub raised a burst's brokers for jobs that wait in the
	// root's Flux queue.
	EventBurstScaledUp = "BurstScaledUp"
	// EventBurstScaledDown (hub): the hub drained a burst's idle ranks in Flux, or removed them
	// once drained.
	EventBurstScaledDown = "BurstScaledDown"
	// EventScalingFailed (Warning, hub): a flux command of a scaling step failed; the step is
	// tried again.
	EventScalingFailed = "ScalingFailed"
	// EventFluxUnreadable (Warning, hub): flux answered in the lead broker's container, and the
	// hub cannot read the answer; it decides no scaling step until it can.
	EventFluxUnreadable = "FluxUnreadable"
	// EventFluxNotAnswering (Warning, hub): the root's instance answered the hub before, and does
	// not now.
	EventFluxNotAnswering = "FluxNotAnswering"
	// EventCleanupPending (Warning, hub): the root is being deleted and some members have not
	// answered yet; recorded when the members waited for change.
	EventCleanupPending = "CleanupPending"
	// EventCleanupIncomplete (Warning, hub): the root's finalizer was released with children
	// left on members that did not answer (the orphan sweep deletes them when they do), or on
	// members no longer registered.
	EventCleanupIncomplete = "CleanupIncomplete"
)
