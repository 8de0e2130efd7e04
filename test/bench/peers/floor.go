package peers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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
type Floor struct {
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
)

func (f *Floor) Name() string { return "floor" }

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
	f.proc, err = w.Env.StartProcess("floor-webhook", self, []string{
		floorAddrEnv + "=" + addr, floorCountEnv + "=" + count,
		floorCertDirEnv + "=" + w.Env.CertDir, floorClientCAEnv + "=" + filepath.Join(w.Env.Dir, "client-ca.crt"),
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
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Reading the review is the least a webhook does: its answer must
		// carry the request's uid.
		var review struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reviews.Add(1)
		w.Header().Set("Content-Type", "application/json")
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
