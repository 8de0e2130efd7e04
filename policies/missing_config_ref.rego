# missing-config-ref: a required reference to a ConfigMap or Secret, or to a
# key in one, that does not exist keeps the pod in ContainerCreating (or
# CreateContainerConfigError) until it does. Optional references never count.
package configward.rules.missing_config_ref

# Comparisons with false instead of `not`: each `not` is an evaluation of
# its own, and these run for every reference of every request.

findings contains f if {
	some ref in input.references
	ref.optional == false
	ref.target.known == true # an object outside the manifests `configward check` was given is unknown, not missing
	ref.target.exists == false
	ref.firstOfSource == true # a volume is reported once, not once per mount
	f := {
		"rule": "missing-config-ref",
		"path": ref.path,
		"message": sprintf(
			"%s references %s (%s), which does not exist: pods will not start until it does. Create it first or mark the reference optional.",
			[input.workload.display, ref.display, ref.path],
		),
	}
}

findings contains f if {
	some ref in input.references
	ref.optional == false
	ref.firstOfSource == true
	some key in ref.target.missingKeys
	f := {
		"rule": "missing-config-ref",
		"path": ref.path,
		"message": sprintf(
			"%s reads key %q of %s (%s), which has no such key: pods will not start until it does. Add the key or mark the reference optional.",
			[input.workload.display, key, ref.display, ref.path],
		),
	}
}
