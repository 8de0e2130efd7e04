package analysis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// userAgent names configward to the servers it asks, for their logs.
const userAgent = "configward-analysis"

// excerptBytes is how much of a field an error quotes (Prometheus' own
// error, a webhook's message): enough for one line, not a page.
const excerptBytes = 200

// CheckAddress is what a check's address (a Prometheus' base URL, a
// webhook's URL) must be, as the policy webhook says when the policy is
// written and the controller again before it connects: an http or https
// URL with a host, and without user info, query string or fragment. The
// address is written in a policy that many can read, and whatever it
// carries is copied into records, history and Events; credentials belong
// in a Secret (secretRef).
func CheckAddress(raw string) error {
	u, err := checkURL(raw)
	if err == nil && (u.RawQuery != "" || u.ForceQuery) {
		err = errors.New("must not have a query string, which would be copied into records and Events; put a token in the Secret that secretRef names")
	}
	return err
}

// checkURL parses an http or https URL with a host. User info is refused:
// the address is written in a policy that many can read, and credentials
// belong in a Secret.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the whole URL in its error; its cause is enough.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("not a valid URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("must be an http or https URL, not %q", u.Scheme)
	case u.Host == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, errors.New("must not carry user info; put credentials in the Secret")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, errors.New("must not have a fragment")
	}
	return u, nil
}

// redactURL names a URL in messages: scheme, host and path, without the
// query string, which may carry a token.
func redactURL(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// tlsConfig verifies servers against ca (PEM) alone when it is given,
// otherwise against the system's roots.
func tlsConfig(ca []byte) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("holds no PEM certificate")
		}
		c.RootCAs = pool
	}
	return c, nil
}

// noRedirects makes a redirect an answer like any other: following it
// would send the credentials, or the call, where nobody configured.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// transportError drops the *url.Error around a client's error, which
// quotes the whole URL (with the query, and so the rendered PromQL), and
// keeps its cause, so errors.Is still finds a deadline.
func transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// excerpt quotes the start of a field of an answer on one line.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
	if s == "" {
		return "(empty)"
	}
	if t := truncate(s, excerptBytes); t != s {
		return t + "…"
	}
	return s
}

// unquoted names an answer that is not what was asked for by its size
// alone: its bytes are the address's, not configward's to publish.
func unquoted(body []byte) string {
	if len(body) == 0 {
		return "an empty body"
	}
	return fmt.Sprintf("a body of %d bytes that is not quoted", len(body))
}

// truncate cuts s to at most n bytes, at a character's start.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
