package peers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/scheme"
)

// warnings collects the warnings the API server returns, for the probes.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen
	w.seen = nil
	return s
}

// Outcome of one dry-run create.
type Outcome struct {
	Denied   bool
	Message  string
	Warnings []string
}

// DryRunCreate sends one server-side dry-run create of the Deployment
// variant and reports what the API server answered.
func DryRunCreate(ctx context.Context, w *World, v Variant, forbidden int) (Outcome, error) {
	return DryRunCreateObject(ctx, w, Deployment(w.Namespace, "probe", v, forbidden))
}

// DryRunCreateObject sends one server-side dry-run create of o and reports
// what the API server answered: denied (with the message) or not, and the
// warnings.
func DryRunCreateObject(ctx context.Context, w *World, o client.Object) (Outcome, error) {
	cfg := rest.CopyConfig(w.Env.Config)
	ws := &warnings{}
	cfg.WarningHandler = ws
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme()})
	if err != nil {
		return Outcome{}, err
	}
	err = c.Create(ctx, o, client.DryRunAll)
	out := Outcome{Warnings: ws.take()}
	switch {
	case err == nil:
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		out.Denied, out.Message = true, err.Error()
	default:
		return out, err
	}
	return out, nil
}

// WaitInForce returns once the stack's whole policy answers as intended:
// the clean Deployment allowed without warnings about secrets, the warned
// one allowed with a secret-in-env warning, the denied one denied for its
// subPath, and each extra rule denying its FORBIDDEN_<i> env var. Engines
// load policies asynchronously; until then requests pass unchecked, and a
// measurement would be of nothing.
func WaitInForce(ctx context.Context, w *World, extra int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = inForce(ctx, w, extra); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("policy not in force after %v: %w", timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func inForce(ctx context.Context, w *World, extra int) error {
	check := func(v Variant, forbidden int, want func(Outcome) error) error {
		o, err := DryRunCreate(ctx, w, v, forbidden)
		if err != nil {
			return err
		}
		if err := want(o); err != nil {
			return fmt.Errorf("variant %d forbidden %d: %w (denied=%v message=%q warnings=%q)", v, forbidden, err, o.Denied, o.Message, o.Warnings)
		}
		return nil
	}
	if err := check(Clean, 0, func(o Outcome) error {
		if o.Denied {
			return errors.New("clean Deployment denied")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := check(Warned, 0, func(o Outcome) error {
		if o.Denied {
			return errors.New("secret-in-env denied, want a warning")
		}
		for _, s := range o.Warnings {
			if strings.Contains(strings.ToLower(s), "secret") {
				return nil
			}
		}
		return errors.New("no secret-in-env warning")
	}); err != nil {
		return err
	}
	if err := check(Denied, 0, func(o Outcome) error {
		if !o.Denied || !strings.Contains(strings.ToLower(o.Message), "subpath") {
			return errors.New("subPath mount of a ConfigMap not denied")
		}
		return nil
	}); err != nil {
		return err
	}
	for i := 1; i <= extra; i++ {
		if err := check(Clean, i, func(o Outcome) error {
			if !o.Denied || !strings.Contains(o.Message, fmt.Sprintf("FORBIDDEN_%d", i)) {
				return errors.New("extra rule not in force")
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// WaitNothingInForce returns once the denied Deployment is allowed without
// warnings: the stack before is gone from the admission chain, so it cannot
// add to the next one's figures.
func WaitNothingInForce(ctx context.Context, w *World, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		o, err := DryRunCreate(ctx, w, Denied, 0)
		if err == nil && !o.Denied && len(o.Warnings) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a policy is still in force after %v: denied=%v message=%q warnings=%q err=%v", timeout, o.Denied, o.Message, o.Warnings, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
