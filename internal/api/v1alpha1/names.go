package v1alpha1

// Annotations configward writes on the objects it manages.
const (
	// ConfigHashAnnotation on a pod template holds the keyed hash of the
	// config its pods consume; a change to it is what rolls the workload.
	ConfigHashAnnotation = "configward.dev/config-hash"
)
