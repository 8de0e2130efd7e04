package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of a webhook check.
const (
	WebhookTimeout  = 10 * time.Second
	WebhookAttempts = 3
)

// retryBase is the wait before the second attempt; it doubles after each
// further one. A variable so the tests need not wait seconds.
var retryBase = time.Second

// maxMessage bounds the message a webhook's answer puts in a delivery's
// status.
const maxMessage = 256

// maxWebhookAnswer bounds what is read of an answer, which is a few bytes.
const maxWebhookAnswer = 1 << 20

// Call is what configward POSTs, as JSON, to a webhook check.
type Call struct {
	Delivery  string   `json:"delivery"`
	Namespace string   `json:"namespace"`
	Config    Config   `json:"config"`
	Check     string   `json:"check"`
	Wave      string   `json:"wave"` // or "bake"
	Workloads []Target `json:"workloads"`
	Pods      []string `json:"pods"`
}

// Config names the delivered config.
type Config struct {
	Kind string `json:"kind"` // ConfigMap or Secret
	Name string `json:"name"`
}

// Target names one workload of the wave.
type Target struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Answer is a webhook's verdict.
type Answer struct {
	Pass    bool   `json:"pass"`
	Message string `json:"message,omitempty"`
}

// Webhook is where a webhook check's call goes: its URL, the roots an
// https URL is verified against (PEM; the system's when empty), a bearer
// token (from the Secret webhook.secretRef names) and where its
// connections may go.
type Webhook struct {
	URL      string
	CABundle []byte
	Token    string
	Reach    Reach
}

// String names the webhook by its URL without a query string. Its token
// is never printed.
func (w Webhook) String() string {
	if u, err := url.Parse(w.URL); err == nil {
		return redactURL(u)
	}
	return "webhook"
}

// GoString keeps %#v from printing the token.
func (w Webhook) GoString() string { return "analysis.Webhook(" + w.String() + ")" }

// CallWebhook POSTs call to w and returns the webhook's Answer. Each
// attempt has timeout (WebhookTimeout when 0); after a connection error, a
// timeout or a 5xx answer it tries again, attempts in all (at least one),
// waiting 1s, then 2s, and so on. A 4xx answer, a redirect, an address
// w.Reach refuses, or a 2xx whose body is not an Answer is an error at
// once: asking again would get the same. A URL with a query string is
// refused (CheckAddress), and neither the token nor anything the webhook
// answers beyond its Answer appears in an error.
func CallWebhook(ctx context.Context, w Webhook, call Call, timeout time.Duration, attempts int) (Answer, error) {
	if err := CheckAddress(w.URL); err != nil {
		return Answer{}, fmt.Errorf("webhook URL: %w", err)
	}
	u, _ := url.Parse(w.URL)
	name := redactURL(u)
	tlsConf, err := tlsConfig(w.CABundle)
	if err != nil {
		return Answer{}, fmt.Errorf("webhook %s: caBundle: %w", name, err)
	}
	token := strings.TrimSpace(w.Token)
	if !validHeaderValue(token) {
		return Answer{}, fmt.Errorf("webhook %s: the token holds characters a header cannot carry", name)
	}
	body, err := json.Marshal(call)
	if err != nil {
		return Answer{}, fmt.Errorf("webhook %s: encoding the call: %w", name, err)
	}
	if timeout <= 0 {
		timeout = WebhookTimeout
	}
	attempts = max(attempts, 1)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConf
	// A client per call: no connection outlives it.
	transport.DisableKeepAlives = true
	w.Reach.transport(transport)
	client := &http.Client{Timeout: timeout, Transport: transport, CheckRedirect: noRedirects}
	// The token is scrubbed from the message an answer carries, in case
	// the webhook echoes it.
	var secrets []string
	if token != "" {
		secrets = append(secrets, token)
	}

	for attempt := 1; ; attempt++ {
		answer, retry, err := callOnce(ctx, client, u.String(), token, body, secrets)
		if err == nil {
			return answer, nil
		}
		err = fmt.Errorf("webhook %s: %w", name, err)
		if attempts > 1 {
			err = fmt.Errorf("%w (attempt %d of %d)", err, attempt, attempts)
		}
		if !retry || attempt >= attempts || IsRefused(err) {
			return Answer{}, err
		}
		wait := time.NewTimer(retryWait(retryBase, attempt))
		select {
		case <-ctx.Done():
			wait.Stop()
			return Answer{}, fmt.Errorf("%w; not tried again: %w", err, context.Cause(ctx))
		case <-wait.C:
		}
	}
}

// retryWait is the wait after the attempt-th attempt: base, then doubled
// each time, at most 30 times base.
func retryWait(base time.Duration, attempt int) time.Duration {
	return min(base<<min(attempt-1, 5), 30*base)
}

// callOnce makes one attempt, and says whether another could answer
// differently.
func callOnce(ctx context.Context, client *http.Client, url, token string, body []byte, secrets []string) (answer Answer, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Answer{}, false, transportError(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, true, transportError(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, maxWebhookAnswer+1))
	if err != nil {
		return Answer{}, true, fmt.Errorf("reading the answer: %w", transportError(err))
	}
	// Of the answer, only the message of a parsed Answer is kept, cut
	// short: nothing else it says is quoted (see parseAnswer).
	switch {
	case resp.StatusCode >= 500:
		return Answer{}, true, fmt.Errorf("HTTP %d, with %s", resp.StatusCode, unquoted(got))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return Answer{}, false, fmt.Errorf("HTTP %d, with %s", resp.StatusCode, unquoted(got))
	case len(got) > maxWebhookAnswer:
		return Answer{}, false, fmt.Errorf("the answer is larger than %d MiB", maxWebhookAnswer>>20)
	}
	var a struct {
		Pass    *bool  `json:"pass"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(got, &a); err != nil {
		return Answer{}, false, fmt.Errorf("the answer is not the JSON of an Answer: %s", unquoted(got))
	}
	// Without "pass", a webhook answering something else would fail every
	// wave with no reason given.
	if a.Pass == nil {
		return Answer{}, false, fmt.Errorf(`the answer has no "pass": %s`, unquoted(got))
	}
	a.Message = scrub(a.Message, secrets)
	return Answer{Pass: *a.Pass, Message: truncate(strings.ToValidUTF8(a.Message, "\uFFFD"), maxMessage)}, false, nil
}
