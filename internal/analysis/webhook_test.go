package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var sampleCall = Call{
	Delivery: "checkout-config-3", Namespace: "shop", Config: Config{Kind: "ConfigMap", Name: "checkout-config"},
	Check: "smoke", Wave: "canary", Workloads: []Target{{Kind: "Deployment", Name: "checkout"}}, Pods: []string{"checkout-5d4f-x2x7k"},
}

// fakeWebhook answers the n-th call (from 1) with answer(n, request) and
// counts the calls.
func fakeWebhook(t *testing.T, tls bool, answer func(n int, w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(int(calls.Add(1)), w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &calls
}

func reply(status int, body string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

func TestCallWebhookAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want Answer
	}{
		{"pass", `{"pass":true}`, Answer{Pass: true}},
		{"fail", `{"pass":false,"message":"error rate 4% in canary","extra":1}`, Answer{Pass: false, Message: "error rate 4% in canary"}},
		{"long message", `{"pass":false,"message":"` + strings.Repeat("é", 200) + `"}`, Answer{Message: strings.Repeat("é", maxMessage/2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, calls := fakeWebhook(t, false, func(_ int, w http.ResponseWriter, r *http.Request) {
				var got Call
				if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
					t.Errorf("got %s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
				}
				if err := json.NewDecoder(r.Body).Decode(&got); err != nil || !reflect.DeepEqual(got, sampleCall) {
					t.Errorf("got call %+v, %v", got, err)
				}
				fmt.Fprint(w, tc.body)
			})
			got, err := CallWebhook(context.Background(), Webhook{URL: srv.URL + "/check"}, sampleCall, time.Second, 3)
			if err != nil || got != tc.want || calls.Load() != 1 {
				t.Fatalf("got %+v, %v after %d calls; want %+v", got, err, calls.Load(), tc.want)
			}
		})
	}
}

func TestCallWebhookCallJSON(t *testing.T) {
	b, err := json.Marshal(sampleCall)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"delivery":"checkout-config-3","namespace":"shop","config":{"kind":"ConfigMap","name":"checkout-config"},"check":"smoke","wave":"canary","workloads":[{"kind":"Deployment","name":"checkout"}],"pods":["checkout-5d4f-x2x7k"]}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
}

func TestCallWebhookRetries5xx(t *testing.T) {
	srv, calls := fakeWebhook(t, false, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"pass":true}`)
	})
	got, err := CallWebhook(context.Background(), Webhook{URL: srv.URL}, sampleCall, time.Second, 3)
	if err != nil || !got.Pass || calls.Load() != 3 {
		t.Fatalf("got %+v, %v after %d calls", got, err, calls.Load())
	}

	calls.Store(-100) // 503 for good
	_, err = CallWebhook(context.Background(), Webhook{URL: srv.URL}, sampleCall, time.Second, 3)
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || !strings.Contains(err.Error(), "attempt 3 of 3") || calls.Load() != -97 {
		t.Fatalf("got %v after %d calls", err, calls.Load()+100)
	}
}

func TestCallWebhookNoRetry(t *testing.T) {
	for _, tc := range []struct {
		name, has string
		answer    func(int, http.ResponseWriter, *http.Request)
	}{
		{"4xx", "HTTP 403", reply(http.StatusForbidden, "forbidden; password: hunter2")},
		{"redirect", "HTTP 307", func(_ int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusTemporaryRedirect)
		}},
		{"not JSON", "not the JSON", reply(200, "<html>password: hunter2</html>")},
		{"no pass", `no "pass"`, reply(200, `{"passed":"hunter2"}`)},
		{"5xx", "HTTP 500", reply(500, "password: hunter2")},
		{"pass not a bool", "not the JSON", reply(200, `{"pass":"yes"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, calls := fakeWebhook(t, false, tc.answer)
			_, err := CallWebhook(context.Background(), Webhook{URL: srv.URL}, sampleCall, time.Second, 3)
			if err == nil || !strings.Contains(err.Error(), tc.has) || (calls.Load() != 1 && tc.name != "5xx") {
				t.Fatalf("got %v after %d calls, want an error with %q after 1", err, calls.Load(), tc.has)
			}
			// Nothing the address answered is copied into the error, which
			// goes to the record and its Events.
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q copies the answer", err)
			}
		})
	}
}

func TestCallWebhookTimeout(t *testing.T) {
	srv, calls := fakeWebhook(t, false, func(_ int, w http.ResponseWriter, r *http.Request) {
		// Read to the end, so the server notices the client leave.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		fmt.Fprint(w, `{"pass":true}`)
	})
	start := time.Now()
	_, err := CallWebhook(context.Background(), Webhook{URL: srv.URL}, sampleCall, 100*time.Millisecond, 3)
	if err == nil {
		t.Fatal("no error")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v", took)
	}
	// The server counts a call once it reads it; the client's last timeout
	// can come before the server's count, so wait for it briefly.
	for deadline := time.Now().Add(time.Second); calls.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if calls.Load() != 3 || !strings.Contains(err.Error(), "attempt 3 of 3") {
		t.Errorf("got %v after %d calls, want 3", err, calls.Load())
	}
}

func TestCallWebhookUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := CallWebhook(context.Background(), Webhook{URL: url}, sampleCall, time.Second, 2)
	if err == nil || !strings.Contains(err.Error(), "attempt 2 of 2") {
		t.Fatalf("got %v", err)
	}
}

func TestCallWebhookContext(t *testing.T) {
	// The caller gives up while CallWebhook waits to try again: it returns
	// then, not after the wait.
	defer func(base time.Duration) { retryBase = base }(retryBase)
	retryBase = 3 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, calls := fakeWebhook(t, false, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.AfterFunc(50*time.Millisecond, cancel)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	start := time.Now()
	_, err := CallWebhook(ctx, Webhook{URL: srv.URL}, sampleCall, time.Second, 3)
	if err == nil || !errors.Is(err, context.Canceled) || calls.Load() != 1 {
		t.Fatalf("got %v after %d calls, want an error after 1", err, calls.Load())
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v", took)
	}

	// Given up before: no call.
	_, err = CallWebhook(ctx, Webhook{URL: srv.URL}, sampleCall, time.Second, 3)
	if err == nil || calls.Load() != 1 {
		t.Fatalf("got %v after %d calls, want an error after none", err, calls.Load()-1)
	}
}

func TestCallWebhookTLS(t *testing.T) {
	srv, _ := fakeWebhook(t, true, reply(200, `{"pass":true}`))
	if got, err := CallWebhook(context.Background(), Webhook{URL: srv.URL, CABundle: caPEM(srv)}, sampleCall, time.Second, 1); err != nil || !got.Pass {
		t.Fatalf("with its CA: got %+v, %v", got, err)
	}
	if _, err := CallWebhook(context.Background(), Webhook{URL: srv.URL}, sampleCall, time.Second, 1); err == nil {
		t.Error("without its CA: no error")
	}
	if _, err := CallWebhook(context.Background(), Webhook{URL: srv.URL, CABundle: otherCA(t)}, sampleCall, time.Second, 1); err == nil {
		t.Error("with another CA: no error")
	}
	if _, err := CallWebhook(context.Background(), Webhook{URL: srv.URL, CABundle: []byte("garbage")}, sampleCall, time.Second, 1); err == nil || !strings.Contains(err.Error(), "caBundle") {
		t.Errorf("garbage caBundle: %v", err)
	}
}

func TestCallWebhookURL(t *testing.T) {
	for _, url := range []string{"ftp://hooks", "hooks:80", "https://user:pw-secret@hooks/check", "https://hooks/check#x"} {
		_, err := CallWebhook(context.Background(), Webhook{URL: url}, sampleCall, time.Second, 1)
		if err == nil || strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("%s: got %v", url, err)
		}
	}
	// A URL with a query string (where a token was put before
	// webhook.secretRef) is refused before any call, and the query string
	// appears in no error.
	srv, calls := fakeWebhook(t, false, func(_ int, w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"pass":true}`) })
	for _, url := range []string{srv.URL + "/check?token=qs-secret%2Fx", srv.URL + "/check?"} {
		_, err := CallWebhook(context.Background(), Webhook{URL: url}, sampleCall, time.Second, 1)
		if err == nil || strings.Contains(err.Error(), "qs-secret") || !strings.Contains(err.Error(), "query string") {
			t.Errorf("%s: got %v", url, err)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("a URL with a query string was called %d times", calls.Load())
	}
}

// TestCallWebhookToken: webhook.secretRef's token goes as a bearer header,
// and neither it nor anything else the webhook answers shows in an error;
// in the message of an Answer, it is scrubbed.
func TestCallWebhookToken(t *testing.T) {
	const token = "hook-token-Qx81"
	srv, _ := fakeWebhook(t, false, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, "no token: "+r.Header.Get("Authorization"))
			return
		}
		fmt.Fprintf(w, `{"pass":false,"message":"you sent %s"}`, r.Header.Get("Authorization"))
	})
	got, err := CallWebhook(context.Background(), Webhook{URL: srv.URL, Token: token + "\n"}, sampleCall, time.Second, 1)
	if err != nil || got.Pass || strings.Contains(got.Message, token) || !strings.Contains(got.Message, "[redacted]") {
		t.Errorf("got %+v, %v", got, err)
	}
	_, err = CallWebhook(context.Background(), Webhook{URL: srv.URL, Token: "other-token-Zz"}, sampleCall, time.Second, 1)
	if err == nil || strings.Contains(err.Error(), "other-token") || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("got %v", err)
	}
	if _, err := CallWebhook(context.Background(), Webhook{URL: srv.URL, Token: "a\x00b"}, sampleCall, time.Second, 1); err == nil {
		t.Error("a token a header cannot carry was sent")
	}
	w := Webhook{URL: srv.URL + "/check", Token: token}
	if shown := fmt.Sprintf("%v %+v %#v %s", w, w, w, w); strings.Contains(shown, token) {
		t.Errorf("%q shows the token", shown)
	}
}

func TestRetryWait(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 30 * time.Second, 60: 30 * time.Second} {
		if got := retryWait(time.Second, attempt); got != want {
			t.Errorf("after attempt %d: %v, want %v", attempt, got, want)
		}
	}
}
