package security

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/admission"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/test/framework"
)

// memoryLimit is the chart's memory limit for the webhook.
const memoryLimit = 512 << 20

// The webhook with its default bounds on work in flight, flooded with the
// largest reviews it accepts.
var _ = Describe("a flood of maximum-size reviews", Ordered, func() {
	var loaded *framework.Process

	BeforeAll(func() {
		var err error
		loaded, err = env.StartWebhookBinary("webhook-flooded", changeControlFlags...)
		Expect(err).NotTo(HaveOccurred())
	})

	It("is answered or shed with a clear error, within the memory limit, and the webhook recovers", func() {
		const parallel = 128
		bodies := [][]byte{
			largeReview(admission.ValidateConfigMapsPath),
			largeReview(admission.ValidateWorkloadsPath),
		}
		paths := []string{admission.ValidateConfigMapsPath, admission.ValidateWorkloadsPath}
		for _, b := range bodies {
			Expect(int64(len(b))).To(BeNumerically("<=", webhookserver.DefaultMaxRequestBytes))
			Expect(int64(len(b))).To(BeNumerically(">", webhookserver.DefaultMaxRequestBytes*9/10))
		}

		var (
			mu      sync.Mutex
			answers = map[int]int{}
			shed    []string
			wg      sync.WaitGroup
		)
		client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: env.ClientTLS(), MaxConnsPerHost: parallel}}
		start := time.Now()
		for i := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer GinkgoRecover()
				resp, err := client.Post("https://"+loaded.Addr+paths[i%2], "application/json", bytes.NewReader(bodies[i%2]))
				Expect(err).NotTo(HaveOccurred())
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				mu.Lock()
				defer mu.Unlock()
				answers[resp.StatusCode]++
				if resp.StatusCode == http.StatusServiceUnavailable {
					shed = append(shed, string(raw))
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		peak := peakRSS(loaded.PID())
		fmt.Fprintf(GinkgoWriter, "%d reviews of %.1f MiB in parallel: %v answers in %v; webhook peak RSS %.0f MiB\n",
			parallel, float64(len(bodies[0]))/(1<<20), answers, took.Round(time.Millisecond), float64(peak)/(1<<20))
		AddReportEntry("flood", fmt.Sprintf("answers %v, peak RSS %d MiB, %v", answers, peak>>20, took.Round(time.Millisecond)))

		Expect(answers[http.StatusOK]+answers[http.StatusServiceUnavailable]).To(Equal(parallel), "answers other than 200 and 503: %v", answers)
		Expect(answers[http.StatusOK]).To(BeNumerically(">", 0), "nothing was answered")
		for _, s := range shed {
			Expect(s).To(ContainSubstring("configward: overloaded"))
		}
		Expect(peak).To(BeNumerically("<", memoryLimit), "the webhook outgrew the chart's memory limit")

		By("clients that declare maximum-size bodies and stall hold the whole byte budget: the next review is shed after a second")
		var stalled []*tls.Conn
		for range webhookserver.DefaultMaxInFlightBytes / webhookserver.DefaultMaxRequestBytes {
			c, err := tls.Dial("tcp", loaded.Addr, env.ClientTLS())
			Expect(err).NotTo(HaveOccurred())
			_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{",
				admission.ValidateWorkloadsPath, webhookserver.DefaultMaxRequestBytes)
			Expect(err).NotTo(HaveOccurred())
			stalled = append(stalled, c)
		}
		time.Sleep(200 * time.Millisecond) // for the server to read their headers
		resp, err := client.Post("https://"+loaded.Addr+admission.ValidateWorkloadsPath, "application/json", bytes.NewReader(smallReview()))
		Expect(err).NotTo(HaveOccurred())
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable), string(raw))
		Expect(string(raw)).To(ContainSubstring("configward: overloaded (33554432 bytes of requests in flight); the request was not checked."))
		Expect(resp.Header.Get("Retry-After")).To(Equal("1"))
		Expect(string(get(loaded.MetricsURL))).To(MatchRegexp(`configward_webhook_requests_refused_total\{reason="overloaded"\} [1-9]`))
		for _, c := range stalled {
			c.Close()
		}

		By("it recovers: the next review is answered and the webhook is ready")
		resp, err = client.Post("https://"+loaded.Addr+admission.ValidateWorkloadsPath, "application/json", bytes.NewReader(smallReview()))
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		ready, err := http.Get(loaded.ProbeURL + "/readyz")
		Expect(err).NotTo(HaveOccurred())
		ready.Body.Close()
		Expect(ready.StatusCode).To(Equal(http.StatusOK))
	})
})

// largeReview is a CREATE review as large as the webhook accepts: a
// ConfigMap with one big value, or a Deployment with one big annotation.
func largeReview(path string) []byte {
	filler := strings.Repeat("x", int(webhookserver.DefaultMaxRequestBytes)-4096)
	req := admissionv1.AdmissionRequest{UID: "flood", Operation: admissionv1.Create, Namespace: "flood", Name: "big"}
	switch path {
	case admission.ValidateConfigMapsPath:
		req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
		req.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		req.Object.Raw = []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"flood"},"data":{"big":%q}}`, filler))
	default:
		req.Kind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
		req.Resource = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		req.Object.Raw = []byte(fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"big","namespace":"flood","annotations":{"big":%q}},`+
			`"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"a","image":"x"}]}}}}`, filler))
	}
	return review(req)
}

func smallReview() []byte {
	req := admissionv1.AdmissionRequest{UID: "after", Operation: admissionv1.Create, Namespace: "flood", Name: "small",
		Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}}
	req.Object.Raw = []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"small","namespace":"flood"},` +
		`"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"a","image":"x"}]}}}}`)
	return review(req)
}

func review(req admissionv1.AdmissionRequest) []byte {
	b, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	Expect(err).NotTo(HaveOccurred())
	return b
}

// peakRSS is the most resident memory the process has had (VmHWM).
func peakRSS(pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	Expect(err).NotTo(HaveOccurred())
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			Expect(err).NotTo(HaveOccurred())
			return kb << 10
		}
	}
	Fail("no VmHWM in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}
