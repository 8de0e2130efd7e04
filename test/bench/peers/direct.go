package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/test/framework"
)

// directCall is one AdmissionReview as the API server sends it for a
// Deployment create: to the mutating config-hash webhook, then to the
// validating workload webhook.
type directCall struct {
	path string
	body []byte
}

// DirectCalls are the reviews of the direct load run, in the order they are
// sent: for each Deployment (clean, warned, clean, denied), the mutating and
// the validating review. The objects are what the API server sends: each is
// the answer to a server-side dry-run create made with no webhook in the
// chain, so it is defaulted and carries its managed fields.
func DirectCalls(ctx context.Context, w *World) ([]directCall, error) {
	var calls []directCall
	namespace := w.Namespace
	for i, v := range []Variant{Clean, Warned, Clean, Denied} {
		dep := Deployment(namespace, fmt.Sprintf("direct-%d", i), v, 0)
		if err := w.Env.Client.Create(ctx, dep, client.DryRunAll); err != nil {
			return nil, fmt.Errorf("dry-run create of the direct run's Deployment: %w", err)
		}
		dep.APIVersion, dep.Kind = "apps/v1", "Deployment"
		raw, err := json.Marshal(dep)
		if err != nil {
			return nil, err
		}
		for _, path := range []string{"/mutate-config-hash", "/validate-workloads"} {
			review := admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{
					UID:             types.UID(fmt.Sprintf("direct-%d", i)),
					Kind:            metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
					Resource:        metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
					RequestKind:     &metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
					RequestResource: &metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
					Namespace:       namespace,
					Name:            fmt.Sprintf("direct-%d", i),
					Operation:       admissionv1.Create,
					UserInfo:        authenticationv1.UserInfo{Username: "bench-user", Groups: []string{"system:authenticated"}},
					Object:          runtime.RawExtension{Raw: raw},
					DryRun:          ptrTo(true),
					Options:         runtime.RawExtension{Raw: []byte(`{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions","dryRun":["All"]}`)},
				},
			}
			body, err := json.Marshal(review)
			if err != nil {
				return nil, err
			}
			calls = append(calls, directCall{path: path, body: body})
		}
	}
	return calls, nil
}

func ptrTo[T any](v T) *T { return &v }

// DirectLoad sends AdmissionReviews straight to the webhook at rate per
// second for duration, as the API server would (its client certificate,
// kept-alive HTTP/1.1 connections), with up to inFlight outstanding.
func DirectLoad(ctx context.Context, env *framework.Env, addr string, calls []directCall, rate float64, duration time.Duration, inFlight int) (Result, error) {
	tr := &http.Transport{TLSClientConfig: env.ClientTLS(), MaxIdleConnsPerHost: inFlight, MaxConnsPerHost: inFlight}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	base := "https://" + addr
	// One call of each kind first, so the run measures answers, not a
	// webhook refusing every review.
	for _, c := range calls {
		if err := post(ctx, hc, base+c.path, c.body); err != nil {
			return Result{}, err
		}
	}
	return OpenLoop(ctx, rate, duration, inFlight, func(ctx context.Context, seq int) error {
		c := calls[seq%len(calls)]
		return post(ctx, hc, base+c.path, c.body)
	}), nil
}

func post(ctx context.Context, hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, out)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review); err != nil || review.Response == nil {
		return fmt.Errorf("%s: not an AdmissionReview answer: %v", url, err)
	}
	return nil
}
