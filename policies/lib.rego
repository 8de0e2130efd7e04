# Helpers shared by the built-in rules. The names used in messages
# (input.workload.display, ref.containerDisplay) come ready-made in the
# input, so every message reads the same way and evaluation stays cheap.
package configward.lib

# How the value reaches the environment, for messages.
env_form(ref) := sprintf("key %q as an environment variable", [ref.keys[0]]) if ref.via == "Env"

env_form(ref) := "all keys as environment variables (envFrom)" if ref.via == "EnvFrom"
