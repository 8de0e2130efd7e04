# secret-in-env: a Secret in the environment is readable by every process in
# the container and its children, ends up in crash dumps and debug output,
# and never updates.
package configward.rules.secret_in_env


findings contains f if {
	some ref in input.envReferences
	ref.kind == "Secret"
	f := {
		"rule": "secret-in-env",
		"path": ref.path,
		"message": sprintf(
			"%s %s gets Secret %q as env (%s): env leaks to child processes and dumps and never updates. Mount the Secret as a file.",
			[input.workload.display, ref.containerDisplay, ref.name, ref.path],
		),
	}
}
