package rules

import "testing"

func TestSettingsPrecedence(t *testing.T) {
	s := Settings{Actions: map[string]Action{SecretInEnv: Deny}}
	for _, tc := range []struct {
		f    Finding
		want Action
	}{
		{Finding{Rule: SecretInEnv}, Deny},
		{Finding{Rule: SubpathConfig, Action: Warn}, Warn},
		{Finding{Rule: SecretFileMode}, Audit},
		{Finding{Rule: "custom-thing"}, Warn},
	} {
		if got := s.ActionFor(tc.f); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.f.Rule, got, tc.want)
		}
	}
}

func TestWarningIsOneLine(t *testing.T) {
	got := Warning(Finding{Rule: ConfigSchema, Message: "ConfigMap a/b breaks ConfigSchema \"s\" (2 violations):\n  key \"x\": bad\n  key \"y\": worse"})
	want := `[config-schema] ConfigMap a/b breaks ConfigSchema "s" (2 violations): key "x": bad; key "y": worse`
	if got != want {
		t.Errorf("Warning = %q\nwant %q", got, want)
	}
}
