package report

import (
	"fmt"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
)

// ConfigReload is the rule of the results that say, per hot ConfigMap or
// Secret a workload mounts, whether its pods took the current content in
// (reported by their reload agents).
const ConfigReload = "config-reload"

// Properties of a config-reload result. PropContent names the current
// content (reload.ContentID), so `configward status` can judge each pod
// live without the key.
const (
	PropConfig  = "config"
	PropContent = "content"
)

// ReloadResult is the config-reload result of one hot config of a
// workload. It carries where the pods stand as a whole, not their counts,
// so it is written when that changes, not with each pod's report: pass
// when every pod with an agent applied the current content (or, without
// a check, has it), fail when a program rejected it, warn while pods are
// still on other content, skip when no pod runs an agent.
func ReloadResult(config, content string, t reload.Tally) openreports.ReportResult {
	res := openreports.ReportResult{
		Rule: ConfigReload, Category: "Config reload",
		Properties: map[string]string{PropConfig: config, PropContent: content},
	}
	withAgent := t.Total() - t.Pods[reload.StateNoAgent]
	switch {
	case len(t.Rejections) > 0:
		r := t.Rejections[0]
		res.Result, res.Severity = "fail", "high"
		res.Description = fmt.Sprintf("%s: the program of pod %s rejected the current content (%s); it runs the configuration it had", config, r.Pod, r.Message)
	case withAgent == 0:
		res.Result = "skip"
		res.Description = fmt.Sprintf("%s is hot, and no pod runs configward's reload agent: nothing says which content the pods applied (add the %s annotation)", config, v1alpha1.ReloadAgentAnnotation)
	case !t.Done():
		res.Result, res.Severity = "warn", "low"
		res.Description = fmt.Sprintf("%s changed: pods are taking the current content in", config)
	default:
		res.Result = "pass"
		res.Description = fmt.Sprintf("every pod with a reload agent has the current content of %s", config)
	}
	return res
}

// StoredReload is what a Report says of one hot config.
type StoredReload struct {
	Config, Content string
}

// StoredReloads reads a Report's config-reload results, in order.
func StoredReloads(r *openreports.Report) []StoredReload {
	if r == nil {
		return nil
	}
	var out []StoredReload
	for _, res := range r.Results {
		if res.Source == Source && res.Rule == ConfigReload {
			out = append(out, StoredReload{Config: res.Properties[PropConfig], Content: res.Properties[PropContent]})
		}
	}
	return out
}
