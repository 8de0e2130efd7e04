# subpath-config: a ConfigMap, Secret or projected volume mounted with
# subPath/subPathExpr is copied once when the container starts and never
# updated in place. That breaks hot reload outright, and it matters for
# rollout-mode config only where rollouts are turned off.
package configward.rules.subpath_config


sub_path(ref) := sprintf("subPath %q", [ref.subPath]) if ref.subPath != ""

sub_path(ref) := sprintf("subPathExpr %q", [ref.subPathExpr]) if {
	ref.subPath == ""
	ref.subPathExpr != ""
}

# Cheap tests first: most volumes are not hot, and most workloads keep
# rollouts on, so sub_path (a function call, which costs more) rarely runs.

findings contains f if {
	some ref in input.volumeReferences
	ref.target.reload == "hot"
	ref.container != ""
	sp := sub_path(ref)
	f := {
		"rule": "subpath-config",
		"action": "Deny",
		"path": ref.mountFieldPath,
		"message": sprintf(
			"%s %s mounts %s with %s at %s (%s): subPath mounts never receive updates, and this %s is marked configward.dev/reload=hot. Mount the volume as a directory (drop the subPath) and point the app at the file inside it.",
			[input.workload.display, ref.containerDisplay, ref.display, sp, ref.mountPath, ref.mountFieldPath, ref.kind],
		),
	}
}

findings contains f if {
	input.workload.rolloutDisabled == true
	some ref in input.volumeReferences
	ref.target.reload == "rollout"
	ref.container != ""
	sp := sub_path(ref)
	f := {
		"rule": "subpath-config",
		"action": "Warn",
		"path": ref.mountFieldPath,
		"message": sprintf(
			"%s %s mounts %s with %s (%s): subPath files never update and config-hash rollouts are off for this workload (its configward.dev/rollout annotation or a ConfigPolicy), so changes never arrive. Drop the subPath or turn rollouts on.",
			[input.workload.display, ref.containerDisplay, ref.display, sp, ref.mountFieldPath],
		),
	}
}
