package member

// The manager's metrics endpoint (internal/metrics.ServerOptions) asks the API server who each
// scraper is and whether it may get /metrics: the manager, whichever mode it runs in, creates
// TokenReviews and SubjectAccessReviews (deploy/rbac, generated from these markers).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
