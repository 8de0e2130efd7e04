package peers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/test/framework"
)

// Floor is the least any admission webhook costs: a process that answers
// every review "allowed" at once, registered exactly as configward's
// webhooks are (the configurations `make manifests` generates, with the
// matchConditions configward's controller keeps on them, so a Deployment
// create calls it twice: the mutating config-hash webhook and the
// validating one), served with configward's TLS settings (TLS 1.2 or
// later, HTTP/1.1, the API server's client certificate required and
// verified). What configward adds over it is what configward's own work
// costs; what it adds over no policy at all is what being a webhook costs
// (the API server encoding the review, TLS, a round trip, decoding the
// answer).
//
// It runs as this test binary started again with floorAddrEnv set (see
// TestMain), so it is a process of its own whose CPU is measured like the
// others', built with nothing but the standard library.
//
// With Stamp, it is the stamping floor, the least a mutating webhook like
// configward's costs: its mutating webhooks answer with a JSON patch that
// stamps one pod-template annotation (a Pod's own, on the Pod path), of
// the length of configward's config hash, so the API server pays for
// applying a patch and for running the mutating chain again, as it does
// for configward. It reads of the review only what that patch needs.
type Floor struct {
	Stamp      bool
	proc       *framework.Component
	metricsURL string
	webhook    []client.Object
}

// The floor process's settings, passed in its environment.
const (
	floorAddrEnv     = "CONFIGWARD_FLOOR_ADDR"
	floorCountEnv    = "CONFIGWARD_FLOOR_COUNT_ADDR"
	floorCertDirEnv  = "CONFIGWARD_FLOOR_CERT_DIR"
	floorClientCAEnv = "CONFIGWARD_FLOOR_CLIENT_CA"
	floorStampEnv    = "CONFIGWARD_FLOOR_STAMP"
)

func (f *Floor) Name() string {
	if f.Stamp {
		return "stamping-floor"
	}
	return "floor"
}

func (f *Floor) PID() int {
	if f.proc == nil {
		return 0
	}
	return f.proc.PID()
}

func (f *Floor) Install(ctx context.Context, w *World, extra int) error {
	ports, err := framework.FreePorts(2)
	if err != nil {
		return err
	}
	addr, count := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	self, err := os.Executable()
	if err != nil {
		return err
	}
	f.proc, err = w.Env.StartProcess(f.Name()+"-webhook", self, []string{
		floorAddrEnv + "=" + addr, floorCountEnv + "=" + count,
		floorCertDirEnv + "=" + w.Env.CertDir, floorClientCAEnv + "=" + filepath.Join(w.Env.Dir, "client-ca.crt"),
		floorStampEnv + "=" + strconv.FormatBool(f.Stamp),
	})
	if err != nil {
		return err
	}
	f.metricsURL = "http://" + count + "/metrics"
	w.Env.ServeWebhooksAt(addr)
	if f.webhook, err = w.Env.InstallWebhookConfigurations(ctx); err != nil {
		return err
	}
	if err := ScopeLikeTheController(ctx, w, f.webhook, false); err != nil {
		return err
	}
	return f.waitCalled(ctx, w, 2*time.Minute)
}

// Reviews is how many reviews the floor has answered.
func (f *Floor) Reviews() (int, error) { return framework.MetricSum(f.metricsURL, floorReviewsMetric) }

// floorReviewsMetric counts the floor's answers, served as a Prometheus
// metric as configward's count is.
const floorReviewsMetric = "floor_reviews_total"

// waitCalled returns once a dry-run create reaches both of the floor's
// webhooks: the API server has loaded the configurations.
func (f *Floor) waitCalled(ctx context.Context, w *World, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		before, err := f.Reviews()
		if err != nil {
			return err
		}
		if _, err := DryRunCreate(ctx, w, Clean, 0); err != nil {
			return err
		}
		after, err := f.Reviews()
		if err != nil {
			return err
		}
		if after-before >= 2 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the floor webhook was called %d times for a Deployment create after %v, want 2", after-before, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (f *Floor) Uninstall(ctx context.Context, w *World) error {
	for _, o := range f.webhook {
		if err := w.Env.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if f.proc != nil {
		return f.proc.Stop()
	}
	return nil
}

// serveFloor is the floor process: it serves until interrupted.
func serveFloor() error {
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(os.Getenv(floorClientCAEnv))
	if err != nil {
		return err
	}
	if !pool.AppendCertsFromPEM(ca) {
		return errors.New("no certificate in the client CA file")
	}
	dir := os.Getenv(floorCertDirEnv)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return err
	}
	var reviews atomic.Int64
	stamp := os.Getenv(floorStampEnv) == "true"
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Reading the review is the least a webhook does: its answer must
		// carry the request's uid. The stamping floor also reads where
		// the object's pod template keeps its annotations.
		var review floorReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reviews.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if stamp && strings.HasPrefix(r.URL.Path, "/mutate-") {
			if patch := review.stampPatch(); patch != nil {
				fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true,"patchType":"JSONPatch","patch":%q}}`,
					review.Request.UID, base64.StdEncoding.EncodeToString(patch))
				return
			}
		}
		fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true}}`, review.Request.UID)
	})
	srv := &http.Server{
		Handler: mux,
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cert},
			NextProtos:   []string{"http/1.1"},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	count := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%s %d\n", floorReviewsMetric, reviews.Load())
	})}
	countLn, err := net.Listen("tcp", os.Getenv(floorCountEnv))
	if err != nil {
		return err
	}
	go func() { _ = count.Serve(countLn) }()
	ln, err := net.Listen("tcp", os.Getenv(floorAddrEnv))
	if err != nil {
		return err
	}
	return srv.ServeTLS(ln, "", "")
}

// floorReview is what the floors read of an AdmissionReview.
type floorReview struct {
	Request struct {
		UID    string                `json:"uid"`
		Kind   struct{ Kind string } `json:"kind"`
		Object struct {
			Metadata floorMeta `json:"metadata"`
			Spec     struct {
				Template    *floorTemplate `json:"template"`
				JobTemplate *struct {
					Spec struct {
						Template *floorTemplate `json:"template"`
					} `json:"spec"`
				} `json:"jobTemplate"`
			} `json:"spec"`
		} `json:"object"`
	} `json:"request"`
}

type floorTemplate struct {
	Metadata *floorMeta `json:"metadata"`
}

type floorMeta struct {
	Annotations map[string]json.RawMessage `json:"annotations"`
}

// stampedHash is the stamping floor's annotation value: as long as
// configward's config hash (hmac-sha256: and 64 hex digits).
var stampedHash = "hmac-sha256:" + strings.Repeat("0", 64)

// Stamped says the stamping floor's annotation is among annotations.
func Stamped(annotations map[string]string) bool {
	return annotations["configward.dev/config-hash"] == stampedHash
}

// stampPatch is the JSON patch that sets the config-hash annotation on
// the object's pod template (on a Pod, on the Pod itself), or nil for an
// object without one.
func (r *floorReview) stampPatch() []byte {
	const key = "configward.dev~1config-hash" // the annotation, escaped for a JSON pointer
	o := &r.Request.Object
	var base string
	var meta *floorMeta
	switch {
	case r.Request.Kind.Kind == "Pod":
		base, meta = "/metadata", &o.Metadata
	case o.Spec.Template != nil:
		base, meta = "/spec/template/metadata", o.Spec.Template.Metadata
	case o.Spec.JobTemplate != nil && o.Spec.JobTemplate.Spec.Template != nil:
		base, meta = "/spec/jobTemplate/spec/template/metadata", o.Spec.JobTemplate.Spec.Template.Metadata
	default:
		return nil
	}
	var patch []map[string]any
	switch {
	case meta == nil:
		patch = []map[string]any{{"op": "add", "path": base, "value": map[string]any{"annotations": map[string]string{"configward.dev/config-hash": stampedHash}}}}
	case meta.Annotations == nil:
		patch = []map[string]any{{"op": "add", "path": base + "/annotations", "value": map[string]string{"configward.dev/config-hash": stampedHash}}}
	default:
		patch = []map[string]any{{"op": "add", "path": base + "/annotations/" + key, "value": stampedHash}}
	}
	b, _ := json.Marshal(patch)
	return b
}
