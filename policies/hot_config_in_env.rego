# hot-config-in-env: environment variables are fixed when a container
# starts, so config that is meant to change under running pods (hot) cannot
# reach them through env or envFrom.
package configward.rules.hot_config_in_env

import data.configward.lib

findings contains f if {
	some ref in input.envReferences
	ref.target.reload == "hot"
	f := {
		"rule": "hot-config-in-env",
		"path": ref.path,
		"message": sprintf(
			"%s %s reads %s %s (%s): environment variables are fixed when the container starts, but this %s is marked configward.dev/reload=hot. Mount it as a volume and read the files, or mark it configward.dev/reload=rollout.",
			[input.workload.display, ref.containerDisplay, ref.display, lib.env_form(ref), ref.path, ref.kind],
		),
	}
}
