package configward.rules_test

import data.configward.rules.hot_config_in_env
import data.configward.rules.missing_config_ref
import data.configward.rules.secret_file_mode
import data.configward.rules.secret_in_env
import data.configward.rules.subpath_config

workload := {"kind": "Deployment", "namespace": "shop", "name": "checkout", "display": "Deployment shop/checkout", "rolloutDisabled": false}

target(reload) := {"known": true, "exists": true, "keys": ["flags.yaml", "password"], "reload": reload, "immutable": false}

mount(kind, reload, sub) := {
	"kind": kind, "name": "flags", "optional": false, "keys": null, "via": "Volume",
	"path": "spec.template.spec.volumes[0].configMap", "container": "api", "containerType": "Regular",
	"display": sprintf("%s %q", [kind, "flags"]), "containerDisplay": `container "api"`, "firstOfSource": true,
	"volume": "flags", "mountFieldPath": "spec.template.spec.containers[0].volumeMounts[0]",
	"mountPath": "/etc/app/flags.yaml", "subPath": sub, "subPathExpr": "", "maxMode": 420,
	"target": target(reload),
}

env(kind, reload, via, keys) := {
	"kind": kind, "name": "flags", "optional": false, "keys": keys, "via": via,
	"path": "spec.template.spec.containers[0].env[0].valueFrom.configMapKeyRef", "container": "api",
	"containerType": "Regular", "firstOfSource": true,
	"display": sprintf("%s %q", [kind, "flags"]), "containerDisplay": `container "api"`, "mountFieldPath": "", "subPath": "", "subPathExpr": "", "maxMode": 0,
	"target": target(reload),
}

doc(refs) := docw(workload, refs)

# The input as internal/ruleinput builds it (its Go tests check that): the
# references again by how they reach the container, and the keys each one
# reads that its existing target lacks.
docw(w, refs) := {
	"workload": w,
	"references": rs,
	"envReferences": [r | some r in rs; r.via in {"Env", "EnvFrom"}],
	"volumeReferences": [r | some r in rs; r.via in {"Volume", "Projected"}],
} if {
	rs := [with_missing_keys(r) | some r in refs]
}

with_missing_keys(r) := object.union(r, {"target": object.union(r.target, {"missingKeys": missing_keys(r)})})

missing_keys(r) := [k | r.target.exists; some k in r.keys; not k in r.target.keys]

rules(fs) := {f.rule | some f in fs}

# subpath-config

test_subpath_of_hot_config_is_denied if {
	fs := subpath_config.findings with input as doc([mount("ConfigMap", "hot", "flags.yaml")])
	some f in fs
	f.action == "Deny"
	f.path == "spec.template.spec.containers[0].volumeMounts[0]"
	contains(f.message, `Deployment shop/checkout container "api" mounts ConfigMap "flags" with subPath "flags.yaml" at /etc/app/flags.yaml`)
}

test_subpath_expr_counts if {
	ref := object.union(mount("Secret", "hot", ""), {"subPathExpr": "$(POD)", "containerType": "Init", "containerDisplay": `init container "api"`})
	some f in subpath_config.findings with input as doc([ref])
	contains(f.message, `init container "api" mounts Secret "flags" with subPathExpr "$(POD)"`)
}

test_directory_mount_of_hot_config_is_fine if {
	count(subpath_config.findings) == 0 with input as doc([mount("ConfigMap", "hot", "")])
}

test_subpath_of_rollout_config_is_fine_when_rollouts_cover_it if {
	count(subpath_config.findings) == 0 with input as doc([mount("ConfigMap", "rollout", "flags.yaml")])
}

test_subpath_of_rollout_config_warns_when_opted_out if {
	inp := docw(object.union(workload, {"rolloutDisabled": true}), [mount("ConfigMap", "rollout", "f")])
	some f in subpath_config.findings with input as inp
	f.action == "Warn"
}

test_subpath_of_ignore_config_is_fine_even_when_opted_out if {
	inp := docw(object.union(workload, {"rolloutDisabled": true}), [mount("ConfigMap", "ignore", "f")])
	count(subpath_config.findings) == 0 with input as inp
}

test_unmounted_volume_is_not_a_subpath if {
	ref := object.union(mount("ConfigMap", "hot", "x"), {"container": ""})
	count(subpath_config.findings) == 0 with input as doc([ref])
}

# hot-config-in-env

test_hot_config_in_env_is_denied if {
	some f in hot_config_in_env.findings with input as doc([env("ConfigMap", "hot", "Env", ["flags.yaml"])])
	contains(f.message, `reads ConfigMap "flags" key "flags.yaml" as an environment variable`)
}

test_hot_config_in_envfrom_is_denied if {
	some f in hot_config_in_env.findings with input as doc([env("Secret", "hot", "EnvFrom", null)])
	contains(f.message, "all keys as environment variables (envFrom)")
}

test_rollout_config_in_env_is_fine if {
	count(hot_config_in_env.findings) == 0 with input as doc([env("ConfigMap", "rollout", "EnvFrom", null)])
}

test_hot_config_in_a_volume_is_not_env if {
	count(hot_config_in_env.findings) == 0 with input as doc([mount("ConfigMap", "hot", "")])
}

# secret-in-env

test_secret_key_in_env_warns if {
	some f in secret_in_env.findings with input as doc([env("Secret", "rollout", "Env", ["password"])])
	f.rule == "secret-in-env"
	count(f.message) <= 256
}

test_secret_envfrom_in_ephemeral_container_warns if {
	ref := object.union(env("Secret", "rollout", "EnvFrom", null), {"containerType": "Ephemeral", "containerDisplay": `ephemeral container "api"`})
	some f in secret_in_env.findings with input as doc([ref])
	contains(f.message, `ephemeral container "api"`)
}

test_configmap_in_env_is_not_a_secret if {
	count(secret_in_env.findings) == 0 with input as doc([env("ConfigMap", "rollout", "Env", ["k"])])
}

test_secret_volume_is_not_env if {
	count(secret_in_env.findings) == 0 with input as doc([mount("Secret", "rollout", "")])
}

# missing-config-ref

missing := {"known": true, "exists": false, "keys": [], "reload": "rollout", "immutable": false}

test_missing_object_warns if {
	ref := object.union(env("ConfigMap", "rollout", "EnvFrom", null), {"target": missing})
	some f in missing_config_ref.findings with input as doc([ref])
	contains(f.message, `references ConfigMap "flags"`)
	contains(f.message, "which does not exist")
	count(f.message) <= 230
}

test_unknown_object_is_not_missing if {
	ref := object.union(env("ConfigMap", "rollout", "EnvFrom", null), {"target": object.union(missing, {"known": false})})
	count(missing_config_ref.findings) == 0 with input as doc([ref])
}

test_optional_missing_object_is_fine if {
	ref := object.union(env("ConfigMap", "rollout", "EnvFrom", null), {"target": missing, "optional": true})
	count(missing_config_ref.findings) == 0 with input as doc([ref])
}

test_missing_key_warns if {
	some f in missing_config_ref.findings with input as doc([env("ConfigMap", "rollout", "Env", ["nope"])])
	contains(f.message, `reads key "nope" of ConfigMap "flags"`)
}

test_present_key_is_fine if {
	count(missing_config_ref.findings) == 0 with input as doc([env("ConfigMap", "rollout", "Env", ["password"])])
}

test_missing_volume_is_reported_once_for_two_mounts if {
	a := object.union(mount("ConfigMap", "rollout", ""), {"target": missing})
	b := object.union(a, {"mountFieldPath": "spec.template.spec.containers[1].volumeMounts[0]", "container": "sidecar", "firstOfSource": false})
	count(missing_config_ref.findings) == 1 with input as doc([a, b])
}

# secret-file-mode

test_default_secret_mode_is_audited if {
	some f in secret_file_mode.findings with input as doc([mount("Secret", "rollout", "")])
	contains(f.message, "file mode 0644")
}

test_owner_only_secret_is_fine if {
	ref := object.union(mount("Secret", "rollout", ""), {"maxMode": 256})
	count(secret_file_mode.findings) == 0 with input as doc([ref])
}

test_configmap_mode_is_not_checked if {
	count(secret_file_mode.findings) == 0 with input as doc([mount("ConfigMap", "rollout", "")])
}

test_every_rule_is_silent_for_a_clean_spec if {
	clean := [
		object.union(mount("ConfigMap", "rollout", ""), {}),
		object.union(mount("Secret", "rollout", ""), {"maxMode": 256, "path": "spec.template.spec.volumes[1].secret"}),
		env("ConfigMap", "rollout", "Env", ["password"]),
	]
	fs := (((subpath_config.findings | hot_config_in_env.findings) | secret_in_env.findings) | missing_config_ref.findings) | secret_file_mode.findings with input as doc(clean)
	count(fs) == 0
}
