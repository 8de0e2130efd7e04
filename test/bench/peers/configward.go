package peers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// Configward runs `configward webhook` as the chart runs it (log verbosity
// 0, the chart's in-flight limits, the API server's client certificate
// required) with the webhook configurations `make manifests` generates: the
// mutating config-hash webhook and the validating ones, with the
// matchConditions its controller keeps on them in a chart install
// (ScopeLikeTheController). Its built-in rules
// are on at their defaults (secret-in-env Warn, subpath-config Deny for a hot
// ConfigMap, missing-config-ref Warn, and the others); extra rules are
// custom Rego rules of one ConfigPolicy.
type Configward struct {
	// Env is added to the process's environment (e.g. GOMAXPROCS=1).
	Env []string
	// Args are added to its flags.
	Args []string

	// PprofAddr serves the webhook's /debug/pprof (set by Install), for
	// a CPU profile under load.
	PprofAddr string

	proc    *framework.Process
	webhook []client.Object
}

const extraRulesPolicy = "bench-extra-rules"

func (c *Configward) Name() string { return "configward" }

func (c *Configward) PID() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.PID()
}

// Process is the running webhook (its address and metrics).
func (c *Configward) Process() *framework.Process { return c.proc }

func (c *Configward) Install(ctx context.Context, w *World, extra int) error {
	ports, err := framework.FreePorts(1)
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	c.PprofAddr = addr
	w.Env.BinaryEnv = c.Env
	proc, err := w.Env.StartWebhookBinary("configward-webhook", append([]string{"--verbosity=0", "--shutdown-delay=0s", "--pprof-bind-address=" + addr}, c.Args...)...)
	w.Env.BinaryEnv = nil
	if err != nil {
		return err
	}
	c.proc = proc
	if extra > 0 {
		if err := w.Env.Client.Create(ctx, extraRules(extra)); err != nil {
			return fmt.Errorf("creating the ConfigPolicy of %d extra rules: %w", extra, err)
		}
	}
	if c.webhook, err = w.Env.InstallWebhookConfigurations(ctx); err != nil {
		return err
	}
	if err := ScopeLikeTheController(ctx, w, c.webhook, extra > 0); err != nil {
		return err
	}
	return WaitInForce(ctx, w, extra, 2*time.Minute)
}

// extraRules is a ConfigPolicy of n custom rules; rule i denies a container
// with an env var named FORBIDDEN_<i>.
func extraRules(n int) *v1alpha1.ConfigPolicy {
	p := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: extraRulesPolicy}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("forbidden-%d", i)
		p.Spec.CustomRules = append(p.Spec.CustomRules, v1alpha1.CustomRule{ID: id, Action: "Deny", Rego: fmt.Sprintf(`package configward.custom.%s

findings contains f if {
	some c in input.object.spec.template.spec.containers
	some e in c.env
	e.name == "FORBIDDEN_%d"
	f := {"rule": %q, "path": "spec.template.spec.containers", "message": sprintf("container %%q sets FORBIDDEN_%d", [c.name])}
}
`, strings.ReplaceAll(id, "-", "_"), i, id, i)})
	}
	return p
}

func (c *Configward) Uninstall(ctx context.Context, w *World) error {
	for _, o := range c.webhook {
		if err := w.Env.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	err := w.Env.Client.Delete(ctx, &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: extraRulesPolicy}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if c.proc != nil {
		return c.proc.Stop()
	}
	return nil
}

// Reviews is how many reviews the webhook has answered
// (configward_webhook_reviews_total, every webhook).
func (c *Configward) Reviews() (int, error) {
	return framework.MetricSum(c.proc.MetricsURL, "configward_webhook_reviews_total")
}
