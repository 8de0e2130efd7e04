package reload

import (
	"strings"
	"syscall"
	"testing"

	"github.com/configward/configward/internal/digest"
)

func TestParseTrigger(t *testing.T) {
	for v, want := range map[string]Trigger{
		"watch":                          {Mode: Watch},
		"signal:SIGHUP@app":              {Mode: Signal, Signal: syscall.SIGHUP, Container: "app"},
		"signal:sigusr2@web":             {Mode: Signal, Signal: syscall.SIGUSR2, Container: "web"},
		"http://localhost:8080/-/reload": {Mode: HTTP, URL: "http://localhost:8080/-/reload"},
		"http://127.0.0.1:9/reload":      {Mode: HTTP, URL: "http://127.0.0.1:9/reload"},
		"http://[::1]:9/reload":          {Mode: HTTP, URL: "http://[::1]:9/reload"},
	} {
		got, err := ParseTrigger(v)
		if err != nil || got != want {
			t.Errorf("ParseTrigger(%q) = %+v, %v; want %+v", v, got, err, want)
		}
	}
	for v, why := range map[string]string{
		"signal:SIGTERM@app":            "never stops the program",
		"signal:SIGKILL@app":            "never stops the program",
		"signal:SIGHUP":                 "signal:<SIGNAL>@<container>",
		"signal:SIGHUP@":                "signal:<SIGNAL>@<container>",
		"http://10.0.0.1:8080/reload":   "not a local URL",
		"http://example.com/reload":     "not a local URL",
		"http://user:pw@localhost/x":    "not an http:// URL",
		"ftp://localhost/x":             "none of",
		"":                              "none of",
		"restart":                       "none of",
		"http://169.254.169.254/latest": "not a local URL",
	} {
		if _, err := ParseTrigger(v); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseTrigger(%q) = %v, want an error saying %q", v, err, why)
		}
	}
}

func TestParseCheck(t *testing.T) {
	got, err := ParseCheck("http://localhost:9090/metrics#app_config_last_reload_successful")
	if err != nil || got != (Check{URL: "http://localhost:9090/metrics", Metric: "app_config_last_reload_successful"}) {
		t.Fatalf("%+v, %v", got, err)
	}
	if got, err := ParseCheck("http://localhost:8080/config/version"); err != nil || got.Metric != "" {
		t.Fatalf("%+v, %v", got, err)
	}
	got, err = ParseCheck("http://localhost:9093/metrics#am_config_last_reload_successful;since=am_config_last_reload_success_timestamp_seconds")
	if err != nil || got != (Check{URL: "http://localhost:9093/metrics", Metric: "am_config_last_reload_successful", Since: "am_config_last_reload_success_timestamp_seconds"}) {
		t.Fatalf("%+v, %v", got, err)
	}
	if got, err := ParseCheck("http://localhost:8080/metrics#;since=app_config_last_reload_success_timestamp_seconds"); err != nil || got.Metric != "" || got.Since == "" {
		t.Fatalf("%+v, %v", got, err)
	}
	for _, bad := range []string{"http://db:5432/x", "http://localhost:1/m#bad metric", "localhost:8080",
		"http://localhost:1/m#ok;after=ts", "http://localhost:1/m#ok;since=", "http://localhost:1/m#ok;since=bad ts"} {
		if _, err := ParseCheck(bad); err == nil {
			t.Errorf("ParseCheck(%q) took it", bad)
		}
	}
}

// A fingerprint made under one token's key matches the content configward
// keeps the digests of, and nothing else: another value, another token, a
// missing or an extra key.
func TestFingerprintsMatch(t *testing.T) {
	values := map[string][]byte{"app.yaml": []byte("level: info"), "blob": {0xff, 0x00}}
	// How configward keeps them: app.yaml in data, blob in binaryData.
	kept := digest.KeyDigests(map[string]string{"app.yaml": "level: info"}, map[string][]byte{"blob": {0xff, 0x00}})
	key := FingerprintKey([]byte("token-1"))
	fps := Fingerprints(key, values)
	if !Matches(key, fps, true, kept) {
		t.Fatal("the content's own fingerprints do not match it")
	}
	if Matches(FingerprintKey([]byte("token-2")), fps, true, kept) {
		t.Error("fingerprints match under another token's key")
	}
	changed := digest.KeyDigests(map[string]string{"app.yaml": "level: debug"}, map[string][]byte{"blob": {0xff, 0x00}})
	if Matches(key, fps, true, changed) {
		t.Error("fingerprints match another value")
	}
	more := digest.KeyDigests(map[string]string{"app.yaml": "level: info", "new": "x"}, map[string][]byte{"blob": {0xff, 0x00}})
	if Matches(key, fps, true, more) {
		t.Error("fingerprints of every key match a content with one more")
	}
	if !Matches(key, fps, false, more) {
		t.Error("fingerprints of some keys (items) do not match a content that has them")
	}
	if Matches(key, nil, false, kept) {
		t.Error("no fingerprint matches")
	}
	// Secrets: their data is tagged as a ConfigMap's data.
	secret := digest.SecretKeyDigests(map[string][]byte{"password": []byte("hunter2")})
	if !Matches(key, Fingerprints(key, map[string][]byte{"password": []byte("hunter2")}), true, secret) {
		t.Error("a Secret's fingerprints do not match it")
	}
	for _, fp := range fps {
		for _, v := range []string{fp.Data, fp.Binary} {
			if strings.Contains(v, "level") || len(v) != 64 {
				t.Errorf("fingerprint %q", v)
			}
		}
	}
}

func TestCut(t *testing.T) {
	long := strings.Repeat("é", MaxMessage)
	got := Cut(long)
	if len(got) > MaxMessage || !strings.HasSuffix(got, "...") {
		t.Fatalf("%d bytes: %q", len(got), got)
	}
	if Cut("short") != "short" {
		t.Fatal("a short message changed")
	}
}
