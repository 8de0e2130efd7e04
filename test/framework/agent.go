package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/configward/configward/internal/reload"
)

// Where kwok runs a pod, nothing runs its reload agent: a spec or the demo
// reports for the pod what its agent would, with a token of the pod's own
// (PodToken) and fingerprints of the content it says the pod has
// (AgentReport), to the webhook's agent endpoint (PostReport).

// PodToken requests a token of pod's service account, of audience, bound
// to the pod, as the kubelet projects it for the agent.
func (e *Env) PodToken(ctx context.Context, p *corev1.Pod, audience string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Spec.ServiceAccountName}}
	if sa.Name == "" {
		sa.Name = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}}}
	if err := e.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("a token of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return req.Status.Token, nil
}

// AgentReport is an agent's report, under token, that its pod has data as
// config ("ConfigMap/flags", every key projected) and what its program made
// of it.
func AgentReport(token, config string, data map[string]string, result, message string) reload.Report {
	return AgentReportOf(token, map[string]map[string]string{config: data}, result, message)
}

// AgentReportOf is AgentReport for several configs (config to its data):
// one report, as an agent sends for every config its pod mounts.
func AgentReportOf(token string, configs map[string]map[string]string, result, message string) reload.Report {
	now := time.Now().UTC()
	var rep reload.Report
	for _, config := range slices.Sorted(maps.Keys(configs)) {
		values := map[string][]byte{}
		for k, v := range configs[config] {
			values[k] = []byte(v)
		}
		rep.Configs = append(rep.Configs, reload.ConfigReport{Config: config, AllKeys: true, Keys: reload.Fingerprints(reload.FingerprintKey([]byte(token)), values),
			SwappedAt: now.Truncate(time.Second), Result: result, At: now, Message: message})
	}
	return rep
}

// CertReportOf is what an agent reports of port of a pod that mounts the
// PEM mountedPEM from secret and presents presented (nil: unreachable), as
// the agent judges it (reload.JudgeServed; before are leaves mounted
// earlier).
func CertReportOf(token string, port int, secret string, mountedPEM []byte, presented *x509.Certificate, before ...*x509.Certificate) (reload.CertReport, error) {
	b, _ := pem.Decode(mountedPEM)
	if b == nil {
		return reload.CertReport{}, fmt.Errorf("no certificate in the mounted PEM")
	}
	mounted, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return reload.CertReport{}, err
	}
	now := time.Now().UTC()
	r := reload.CertReport{Port: port, Secret: secret, Keys: reload.Fingerprints(reload.FingerprintKey([]byte(token)), map[string][]byte{reload.TLSCert: mountedPEM}),
		Mounted: reload.LeafOf(mounted), SwappedAt: now.Truncate(time.Second), CheckedAt: now, Result: reload.CertUnreachable, Message: "connection refused"}
	if presented != nil {
		leaf := reload.LeafOf(presented)
		var earlier []string
		for _, c := range before {
			earlier = append(earlier, reload.LeafOf(c).SHA256)
		}
		r.Presented, r.Result, r.Message = &leaf, reload.JudgeServed(leaf, r.Mounted, earlier), ""
	}
	return r, nil
}

// PostReport posts rep with token to the in-process webhook's agent
// endpoint, as an agent does, and returns the status and body.
func (e *Env) PostReport(token string, rep reload.Report) (int, string, error) {
	if e.Webhook == nil || e.Webhook.Agents == nil || e.Webhook.Agents.Addr() == nil {
		return 0, "", fmt.Errorf("no reload agent endpoint runs")
	}
	return e.PostReportTo(e.Webhook.Agents.Addr().String(), token, rep)
}

// AgentFlags are the flags that make a webhook binary inject the agent
// and take reports on addr, as the chart does.
func (e *Env) AgentFlags(addr string) []string {
	return []string{"--reload-agent-image=" + AgentImage, "--reload-agent-bind-address=" + addr,
		"--reload-agent-report-url=https://" + addr, "--reload-agent-ca-file=" + filepath.Join(e.Dir, "client-ca.crt")}
}

// PostReportTo posts rep with token to the agent endpoint at addr.
func (e *Env) PostReportTo(addr, token string, rep reload.Report) (int, string, error) {
	pool := x509.NewCertPool()
	pool.AddCert(e.CA.Cert)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	body, err := json.Marshal(rep)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+reload.ReportPath, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(out), nil
}
