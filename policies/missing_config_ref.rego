# missing-config-ref: a required reference to a ConfigMap or Secret, or to a
# key in one, that does not exist keeps the pod in ContainerCreating (or
# CreateContainerConfigError) until it does. Optional references never count.
package configward.rules.missing_config_ref

import data.configward.lib

# Volumes are reported once per volume, not once per mount.
reported(ref) if ref.via in {"Env", "EnvFrom"}

reported(ref) if {
	ref.via in {"Volume", "Projected"}
	not other_mount_first(ref)
}

other_mount_first(ref) if {
	some other in input.references
	other.path == ref.path
	other.mountFieldPath < ref.mountFieldPath
}

findings contains f if {
	some ref in input.references
	not ref.optional
	not ref.target.exists
	reported(ref)
	f := {
		"rule": "missing-config-ref",
		"path": ref.path,
		"message": sprintf(
			"%s references %s (%s), which does not exist in namespace %s: its pods will not start until it does. Create it first, or mark the reference optional.",
			[lib.object, lib.target(ref), ref.path, input.workload.namespace],
		),
	}
}

findings contains f if {
	some ref in input.references
	not ref.optional
	ref.target.exists
	reported(ref)
	some key in ref.keys
	not key in ref.target.keys
	f := {
		"rule": "missing-config-ref",
		"path": ref.path,
		"message": sprintf(
			"%s reads key %q of %s (%s), which has no such key: its pods will not start until it does. Add the key, or mark the reference optional.",
			[lib.object, key, lib.target(ref), ref.path],
		),
	}
}
