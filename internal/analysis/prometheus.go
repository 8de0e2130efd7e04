package analysis

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Prometheus is a Prometheus-compatible HTTP API: Prometheus, Thanos,
// Mimir, VictoriaMetrics. Make one per address and credentials and keep
// it: its client reuses connections.
type Prometheus struct {
	address  string // as given, without a trailing slash; no secret in it
	endpoint string // address + /api/v1/query
	auth     string // the Authorization header, or ""
	client   *http.Client
	// secrets are the credential values, to scrub from any answer quoted in
	// an error (a proxy may echo a request's headers back).
	secrets []string
}

// Credentials come from a Secret: "token" is sent as a bearer token,
// "username" and "password" as basic auth, and "ca.crt", PEM, when set, is
// the only root an https address is verified against (otherwise the
// system's roots). Their values are never printed: String and GoString
// say only which are set.
type Credentials struct {
	Token, Username, Password string
	CA                        []byte
}

// String says which credentials are set, never their values.
func (c Credentials) String() string {
	var set []string
	if c.Token != "" {
		set = append(set, "token")
	}
	if c.Username != "" {
		set = append(set, "username")
	}
	if c.Password != "" {
		set = append(set, "password")
	}
	if len(c.CA) > 0 {
		set = append(set, "ca.crt")
	}
	if len(set) == 0 {
		return "no credentials"
	}
	return "credentials: " + strings.Join(set, ", ")
}

// GoString keeps %#v from printing the fields.
func (c Credentials) GoString() string { return c.String() }

// maxAnswer bounds what is read of an answer: one number is a few hundred
// bytes; a query that returns every series is refused after counting, and
// no answer may hold the controller's memory.
const maxAnswer = 8 << 20

// maxGet is the longest query string sent in a URL. A wave of hundreds of
// pods makes a long {{ .Pods }}, and proxies in front of Prometheus refuse
// long URLs (nginx at 8 KiB); above it the query is POSTed as a form, which
// every Prometheus-compatible API takes at the same path.
const maxGet = 4 << 10

// NewPrometheus checks address (an http or https URL, without query string,
// fragment or user info: credentials belong in the Secret) and builds a
// client that gives each request timeout, speaks TLS 1.2 or later, and does
// not follow redirects (which could carry the credentials elsewhere).
//
// Its connections go only where reach admits (see Reach).
func NewPrometheus(address string, c Credentials, timeout time.Duration, reach Reach) (*Prometheus, error) {
	if err := CheckAddress(address); err != nil {
		return nil, fmt.Errorf("prometheus address: %w", err)
	}
	u, _ := url.Parse(address)
	if timeout <= 0 {
		return nil, errors.New("prometheus: the query timeout must be positive")
	}
	p := &Prometheus{address: strings.TrimSuffix(redactURL(u), "/")}
	p.endpoint = strings.TrimSuffix(u.String(), "/") + "/api/v1/query"

	// A token file written with a newline at its end is the usual case.
	token := strings.TrimSpace(c.Token)
	switch {
	case token != "" && (c.Username != "" || c.Password != ""):
		return nil, errors.New("prometheus credentials: the Secret sets both token and username/password; keep one")
	case token != "":
		if !validHeaderValue(token) {
			return nil, errors.New("prometheus credentials: the token holds characters a header cannot carry")
		}
		p.auth = "Bearer " + token
		p.secrets = append(p.secrets, token)
	case c.Username != "" || c.Password != "":
		if c.Username == "" || c.Password == "" {
			return nil, errors.New("prometheus credentials: basic auth needs both username and password")
		}
		if strings.Contains(c.Username, ":") {
			return nil, errors.New("prometheus credentials: a basic auth username cannot hold ':'")
		}
		encoded := base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Password))
		p.auth = "Basic " + encoded
		p.secrets = append(p.secrets, c.Password, c.Username, encoded)
	}

	tlsConfig, err := tlsConfig(c.CA)
	if err != nil {
		return nil, fmt.Errorf("prometheus credentials: ca.crt: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	// Checks ask every few seconds; between deliveries the connection is
	// let go, and so is that of a Prometheus dropped by its caller.
	transport.IdleConnTimeout = 30 * time.Second
	reach.transport(transport)
	p.client = &http.Client{Timeout: timeout, Transport: transport, CheckRedirect: noRedirects}
	return p, nil
}

// String names the Prometheus by its address, which holds no secret.
func (p *Prometheus) String() string { return p.address }

// GoString keeps %#v from printing the Authorization header.
func (p *Prometheus) GoString() string { return "analysis.Prometheus(" + p.address + ")" }

// Result is one number from a query. NoData is an empty answer or one
// that is not a number (NaN, ±Inf): "no requests" gives 0/0 = NaN, which
// the caller treats as it treats no series at all.
type Result struct {
	Value  float64
	NoData bool
}

// Query runs an instant query at the time at (now if at is zero) and
// returns its one number: a vector of exactly one sample, or a scalar.
func (p *Prometheus) Query(ctx context.Context, query string, at time.Time) (Result, error) {
	form := url.Values{"query": {query}}
	if !at.IsZero() {
		form.Set("time", formatTime(at))
	}
	encoded := form.Encode()
	var req *http.Request
	var err error
	if len(encoded) <= maxGet {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, p.endpoint+"?"+encoded, nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, strings.NewReader(encoded))
		if req != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("querying %s: %w", p.address, transportError(err))
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if p.auth != "" {
		req.Header.Set("Authorization", p.auth)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("querying %s: %w", p.address, transportError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return Result{}, fmt.Errorf("querying %s: reading the answer: %w", p.address, transportError(err))
	}
	if len(body) > maxAnswer {
		return Result{}, fmt.Errorf("querying %s: the answer is larger than %d MiB", p.address, maxAnswer>>20)
	}
	r, err := parseAnswer(resp.StatusCode, body, p.secrets)
	if err != nil {
		return Result{}, fmt.Errorf("querying %s: %w", p.address, err)
	}
	return r, nil
}

// apiAnswer is the envelope of Prometheus' HTTP API.
type apiAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// parseAnswer reads Prometheus' answer. Its own error JSON comes with 4xx
// and 5xx statuses, and says more than the status does, so it is read
// first. Of an answer, an error quotes only Prometheus' own error field,
// scrubbed of secrets whole (a secret cut by the truncation would
// otherwise leave its prefix) and cut short: the address is a policy
// author's choice, and whatever else it answers (an internal page, an
// echo of the request) would be copied into records and Events that
// everyone who can view the namespace reads.
func parseAnswer(status int, body []byte, secrets []string) (Result, error) {
	var a apiAnswer
	jsonErr := json.Unmarshal(body, &a)
	if jsonErr == nil && a.Status == "error" {
		return Result{}, fmt.Errorf("prometheus answered %s: %s", orUnknown(truncate(a.ErrorType, 32)), excerpt([]byte(scrub(a.Error, secrets))))
	}
	if status < 200 || status > 299 {
		return Result{}, fmt.Errorf("HTTP %d, with %s", status, unquoted(body))
	}
	if jsonErr != nil {
		return Result{}, fmt.Errorf("the answer is not JSON: %s", unquoted(body))
	}
	if a.Status != "success" {
		return Result{}, errors.New(`the answer's status is not "success"`)
	}
	switch a.Data.ResultType {
	case "vector":
		var samples []struct {
			Value sample `json:"value"`
		}
		if err := json.Unmarshal(a.Data.Result, &samples); err != nil {
			return Result{}, errors.New("the vector in the answer does not parse")
		}
		switch len(samples) {
		case 0:
			return Result{NoData: true}, nil
		case 1:
			return resultOf(samples[0].Value)
		default:
			return Result{}, fmt.Errorf("the query returns %d series, and a check needs one number: aggregate them, e.g. with sum(...)", len(samples))
		}
	case "scalar":
		var s sample
		if err := json.Unmarshal(a.Data.Result, &s); err != nil {
			return Result{}, errors.New("the scalar in the answer does not parse")
		}
		return resultOf(s)
	case "matrix":
		return Result{}, errors.New("the query returns a range vector, and a check needs one number: drop the range, or wrap it in a function such as rate(...)")
	default:
		return Result{}, errors.New("the answer's resultType is none of vector, scalar or matrix, and a check needs a number")
	}
}

// sample is Prometheus' [time, "value"] pair; the value is a string so
// that NaN and ±Inf survive JSON.
type sample struct {
	value string
}

func (s *sample) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	if len(pair) != 2 {
		return fmt.Errorf("a sample has %d elements, not [time, value]", len(pair))
	}
	return json.Unmarshal(pair[1], &s.value)
}

func resultOf(s sample) (Result, error) {
	v, err := strconv.ParseFloat(s.value, 64)
	if err != nil {
		return Result{}, errors.New("the sample's value is not a number")
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Result{NoData: true}, nil
	}
	return Result{Value: v}, nil
}

// formatTime writes at as Prometheus' time parameter: Unix seconds, with
// milliseconds, its resolution.
func formatTime(at time.Time) string {
	return strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// scrub replaces each secret in s. Answers are quoted in errors, and an
// answer may hold what was sent: a proxy that echoes the request's headers.
func scrub(s string, secrets []string) string {
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// validHeaderValue says whether s can be a header value as is: no control
// characters. Go's client would refuse such a header on every query; this
// says so once, when the check is set up.
func validHeaderValue(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
