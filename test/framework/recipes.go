package framework

// Recipe is how docs/apps/hot-reload.md runs a program written outside
// this project under the reload agent: its annotations and the flags it
// needs. The node suite applies these (test/node/programs_test.go) and
// the docs test checks the page shows them as they are, so the recipes
// users copy are the ones the suite proves.
type Recipe struct {
	Program string
	// Trigger and Check are the configward.dev/reload-agent and
	// configward.dev/reload-check annotations.
	Trigger, Check string
	// Args are the program's flags the recipe needs.
	Args []string
}

// Recipes are the tested recipes: Prometheus (HTTP), Alertmanager
// (signal) and Caddy (watch).
var Recipes = []Recipe{{
	Program: "prometheus",
	Trigger: "http://localhost:9090/-/reload",
	Check:   "http://localhost:9090/metrics#prometheus_config_last_reload_successful;since=prometheus_config_last_reload_success_timestamp_seconds",
	Args:    []string{"--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/data", "--web.enable-lifecycle", "--web.listen-address=:9090"},
}, {
	Program: "alertmanager",
	Trigger: "signal:SIGHUP@alertmanager",
	Check:   "http://localhost:9093/metrics#alertmanager_config_last_reload_successful;since=alertmanager_config_last_reload_success_timestamp_seconds",
	Args:    []string{"--config.file=/etc/alertmanager/alertmanager.yml", "--storage.path=/data", "--cluster.listen-address=", "--web.listen-address=:9093"},
}, {
	Program: "caddy",
	Trigger: "watch",
	Check:   "http://localhost:2019/metrics#caddy_config_last_reload_successful;since=caddy_config_last_reload_success_timestamp_seconds",
	Args:    []string{"run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile", "--watch"},
}}

// RecipeOf is the recipe of program.
func RecipeOf(program string) Recipe {
	for _, r := range Recipes {
		if r.Program == program {
			return r
		}
	}
	panic("no recipe for " + program)
}
