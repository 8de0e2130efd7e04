# secret-file-mode: Secret files readable by group or others are readable by
# any process in the pod running under another user, and by sidecars.
package configward.rules.secret_file_mode


findings contains f if {
	some ref in input.volumeReferences
	ref.kind == "Secret"
	ref.firstOfSource == true # once per volume source, not once per mount
	bits.and(ref.maxMode, 63) != 0 # 0o077: any group or other permission
	f := {
		"rule": "secret-file-mode",
		"path": ref.path,
		"message": sprintf(
			"%s mounts Secret %q with file mode %s (%s): group and others can read it. Set defaultMode to 0400 (0440 with fsGroup).",
			[input.workload.display, ref.name, octal(ref.maxMode), ref.path],
		),
	}
}

octal(mode) := sprintf("0%o", [mode])
