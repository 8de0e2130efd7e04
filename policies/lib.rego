# Helpers shared by the built-in rules: how objects, containers and
# references are named in messages, so every message reads the same way.
package configward.lib

# "Deployment shop/checkout"
object := sprintf("%s %s/%s", [input.workload.kind, input.workload.namespace, input.workload.name])

# `container "api"`, `init container "setup"`, `ephemeral container "debug"`
container(ref) := sprintf("container %q", [ref.container]) if ref.containerType == "Regular"

container(ref) := sprintf("init container %q", [ref.container]) if ref.containerType == "Init"

container(ref) := sprintf("ephemeral container %q", [ref.container]) if ref.containerType == "Ephemeral"

# `ConfigMap "flags"`
target(ref) := sprintf("%s %q", [ref.kind, ref.name])

# The reload mode of the referenced object; an object that does not exist
# (yet) has the default mode.
reload(ref) := ref.target.reload if ref.target.exists

reload(ref) := "rollout" if not ref.target.exists

mounted(ref) if {
	ref.via in {"Volume", "Projected"}
	ref.container != ""
}

in_env(ref) if ref.via in {"Env", "EnvFrom"}

# How the value reaches the environment, for messages.
env_form(ref) := sprintf("key %q as an environment variable", [ref.keys[0]]) if {
	ref.via == "Env"
	count(ref.keys) == 1
}

env_form(ref) := "all keys as environment variables (envFrom)" if ref.via == "EnvFrom"
