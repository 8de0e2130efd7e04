// Package agent is `configward agent`, the reload agent configward injects
// into pods that ask for it, as a native sidecar (internal/reload is its
// contract with configward). It watches the hot ConfigMap and Secret
// directories the pod mounts for the kubelet's atomic swap of ..data, reads
// each new content whole, triggers the program's reload once per swap (a
// signal, a local call, or nothing when the program watches its files),
// reads back what the program applied, and reports it to configward as the
// pod. It never restarts the program, keeps no value beyond the moment it
// fingerprints one, and goes on reloading while configward is unreachable:
// its reports are retried, the latest replacing any not sent yet. Where the
// pod mounts several configs, it first asks configward whether what is on
// disk holds one set (see ask.go): a change set's members swap in one
// after the other, and the program is reloaded only once they all have.
package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/configward/configward/internal/reload"
)

// Options tune the agent; the zero value is what runs in pods.
type Options struct {
	// Poll is how often every directory's ..data is looked at, beside the
	// file-system events (which a full inotify queue can lose).
	Poll time.Duration
	// Debounce merges swaps that land together (several volumes updated in
	// one kubelet sync) into one reload.
	Debounce time.Duration
	// Settle is how long after a reload the check is first read.
	Settle time.Duration
	// Proc is where processes are listed.
	Proc string
	// RetryMax bounds the wait between two tries of a report.
	RetryMax time.Duration
	// Resend is how often a taken report is sent again, unchanged: it
	// costs configward one TokenReview and no write when nothing changed,
	// and puts right what configward could not judge when it came (a new
	// installation key, a content its cache had not seen).
	Resend time.Duration
	// AskMax bounds the wait between two questions to configward while
	// the configs on disk do not hold one set, or configward cannot be
	// asked.
	AskMax time.Duration
	// CertEvery is how often a served certificate is checked besides after
	// each swap of the mounted one; CertTimeout bounds one dial and
	// handshake.
	CertEvery   time.Duration
	CertTimeout time.Duration
	// PodIP is the pod's address (reload.PodIPEnv), dialed when nothing
	// answers on localhost.
	PodIP string
	// CheckFor bounds how long after a reload the check is read for a
	// proof of what the program made of the new content.
	CheckFor time.Duration
}

func (o Options) withDefaults() Options {
	if o.Poll == 0 {
		o.Poll = 2 * time.Second
	}
	if o.Debounce == 0 {
		o.Debounce = 250 * time.Millisecond
	}
	if o.Settle == 0 {
		o.Settle = time.Second
	}
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.RetryMax == 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.Resend == 0 {
		o.Resend = 10 * time.Minute
	}
	if o.AskMax == 0 {
		o.AskMax = 16 * time.Second
	}
	if o.CertEvery == 0 {
		o.CertEvery = 10 * time.Minute
	}
	if o.CertTimeout == 0 {
		o.CertTimeout = 5 * time.Second
	}
	if o.PodIP == "" {
		o.PodIP = podIP()
	}
	if o.CheckFor == 0 {
		o.CheckFor = 2 * time.Minute
	}
	return o
}

// state is what the agent knows of one config.
type state struct {
	config    reload.Config
	revision  string
	swappedAt time.Time
	result    reload.ConfigReport
	// set is the set configward last said the config belongs to ("" for
	// none).
	set string
	// good sums the content the program last applied or started on: its
	// last good configuration ("" when nothing says what it runs).
	good string
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, spec reload.Spec, o Options, log logr.Logger) error {
	o = o.withDefaults()
	rep, err := newReporter(spec, o.RetryMax, o.Resend, log)
	if err != nil {
		return err
	}
	if len(spec.Certificates) > 0 {
		go checkCerts(ctx, spec.Certificates, o, rep, log)
	}
	if len(spec.Configs) == 0 {
		// Injected for the certificate check alone: no program to reload.
		<-ctx.Done()
		rep.stop()
		return nil
	}
	trigger, err := reload.ParseTrigger(spec.Trigger)
	if err != nil {
		return err
	}
	prog := &program{trigger: trigger, client: &http.Client{Timeout: 10 * time.Second}, proc: o.Proc, settle: o.Settle, checkFor: o.CheckFor}
	if spec.Check != "" {
		c, err := reload.ParseCheck(spec.Check)
		if err != nil {
			return err
		}
		prog.check = &c
	}
	states := make([]*state, len(spec.Configs))
	var ids []string
	for i, c := range spec.Configs {
		states[i] = &state{config: c}
		ids = append(ids, c.ID())
	}
	// What the program says stays in the pod, and out of the agent's own
	// log, where it might quote a Secret.
	shareable := reload.Shareable(ids)
	told := func(r result) result {
		if !shareable && r.message != "" {
			r.message = reload.Withheld
		}
		return r
	}
	changed := watch(ctx, spec.Configs, o.Poll, log)
	gate := &setGate{asker: rep, log: log, maxWait: o.AskMax}

	// At start the program reads what is on disk by itself: nothing to
	// trigger. A check, where there is one, says what it runs (the agent
	// may be a sidecar restarted beside a running program); the agent, a
	// native sidecar, starts before the program, so the check is read
	// until the program answers.
	first := result{what: reload.Seen, message: "the program starts on it"}
	for prog.check != nil && ctx.Err() == nil {
		swappedAt, current := onDisk(states)
		if r := prog.await(ctx, first, swappedAt, current, false); r.what != "" {
			first = r
			break
		}
	}
	// A program starts on its config or exits: without a check, or with
	// one that says so, it runs what is on disk.
	started := first.what == reload.Applied || prog.check == nil
	for _, s := range states {
		s.look(told(first), started, log)
	}
	rep.update(states)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			rep.stop()
			return nil
		case <-changed:
			if !pending {
				pending = true
				timer.Reset(o.Debounce)
			}
		case <-timer.C:
			pending = false
			var swapped []*state
			for _, s := range states {
				if revisionOf(s.config.Dir) != s.revision {
					swapped = append(swapped, s)
				}
			}
			if len(swapped) == 0 || !gate.open(ctx, states, swapped) {
				continue // the poll looks again
			}
			swappedAt, current := onDisk(swapped)
			r := prog.reloadAndCheck(ctx, swappedAt, current, backToGood(states))
			if r.what == "" {
				continue // swapped again: the poll reloads the newer one
			}
			r = told(r)
			for _, s := range swapped {
				s.look(r, r.what == reload.Applied, log)
			}
			rep.update(states)
		}
	}
}

// onDisk is when the latest of states' contents on disk now was swapped
// in, and a test that says those contents are still the ones on disk: the
// program must act on them, and while none is swapped again.
func onDisk(states []*state) (time.Time, func() bool) {
	revisions := map[*state]string{}
	var swappedAt time.Time
	for _, s := range states {
		revisions[s] = revisionOf(s.config.Dir)
		if at, err := swapTime(s.config.Dir, revisions[s]); err == nil && at.After(swappedAt) {
			swappedAt = at
		}
	}
	return swappedAt, func() bool {
		for s, rev := range revisions {
			if revisionOf(s.config.Dir) != rev {
				return false
			}
		}
		return true
	}
}

// backToGood says whether every config on disk is again the content of
// the program's last good configuration (a rollback after a rejection).
func backToGood(states []*state) bool {
	for _, s := range states {
		c, err := read(s.config)
		if err != nil || s.good == "" || c.sum() != s.good {
			return false
		}
	}
	return true
}

// look reads s's config as it is on disk now and records r as what the
// program made of it; runs says the program now runs that content.
func (s *state) look(r result, runs bool, log logr.Logger) {
	c, err := read(s.config)
	if err != nil {
		if !errors.Is(err, errSwapped) {
			log.Error(err, "reading config", "config", s.config.ID())
		}
		return
	}
	s.revision, s.swappedAt = c.revision, c.swappedAt
	switch {
	case runs:
		s.good = c.sum()
	case r.what != reload.Rejected:
		// Nothing proves what the program made of it: it may run it, or
		// what it had. (A rejection keeps what it had.)
		s.good = ""
	}
	s.result = reload.ConfigReport{Config: s.config.ID(), SwappedAt: c.swappedAt, Result: r.what, At: time.Now().UTC(), Message: r.message,
		AllKeys: s.config.Items == nil, Set: s.set}
	log.Info("config", "config", s.config.ID(), "revision", c.revision, "result", r.what, "message", r.message)
}

// reporter sends the latest report to configward, retrying until it is
// taken; a newer report replaces one not sent yet.
type reporter struct {
	spec     reload.Spec
	client   *http.Client
	retryMax time.Duration
	resend   time.Duration
	log      logr.Logger

	mu        sync.Mutex
	latest    []reload.Config
	parts     map[string]reload.ConfigReport
	revisions map[string]string
	certs     []certSnapshot
	wake      chan struct{}
	done      chan struct{}
	once      sync.Once
}

func newReporter(spec reload.Spec, retryMax, resend time.Duration, log logr.Logger) (*reporter, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: spec.ServerName}
	if spec.CA != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(spec.CA)) {
			return nil, fmt.Errorf("the agent spec's CA holds no certificate")
		}
		tlsConfig.RootCAs = pool
	}
	r := &reporter{spec: spec, retryMax: retryMax, resend: resend, log: log, wake: make(chan struct{}, 1), done: make(chan struct{}),
		// One connection per report: reports are minutes apart, and a
		// thousand pods holding a connection each would hold configward's
		// memory for nothing.
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}}}
	go r.loop()
	return r, nil
}

// update queues the states as the next report.
func (r *reporter) update(states []*state) {
	r.mu.Lock()
	r.latest, r.parts, r.revisions = nil, map[string]reload.ConfigReport{}, map[string]string{}
	for _, s := range states {
		if s.revision == "" {
			continue
		}
		r.latest = append(r.latest, s.config)
		r.parts[s.config.ID()], r.revisions[s.config.ID()] = s.result, s.revision
	}
	r.mu.Unlock()
	r.poke()
}

// updateCerts queues the checks' findings with the next report.
func (r *reporter) updateCerts(checks []*certCheck) {
	var certs []certSnapshot
	for _, c := range checks {
		if c.last.Result != "" {
			certs = append(certs, certSnapshot{report: c.last, pemBytes: c.pemBytes})
		}
	}
	r.mu.Lock()
	r.certs = certs
	r.mu.Unlock()
	r.poke()
}

func (r *reporter) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *reporter) stop() { r.once.Do(func() { close(r.done) }) }

func (r *reporter) loop() {
	wait := time.Duration(0)
	sent := true
	for {
		// Taken, it is sent again after resend, a little before or after
		// (so pods started together do not report together); not taken,
		// after wait.
		next := r.resend - r.resend/10 + rand.N(r.resend/5+1)
		if !sent {
			next = wait
		}
		retry := time.After(next)
		select {
		case <-r.done:
			return
		case <-r.wake:
		case <-retry:
		}
		if err := r.send(); err != nil {
			sent = false
			wait = min(max(2*wait, time.Second), r.retryMax)
			r.log.Info("report not taken; retrying", "in", wait.String(), "error", err.Error())
			continue
		}
		sent, wait = true, 0
	}
}

// send sends the latest report once. Fingerprints are made now, from the
// disk and under the key of the token read now (tokens rotate): a content
// swapped since its result was recorded is left out, its own report
// follows.
func (r *reporter) send() error {
	r.mu.Lock()
	configs, parts, revisions, certs := r.latest, r.parts, r.revisions, r.certs
	r.mu.Unlock()
	token, key, err := r.token()
	if err != nil {
		return err
	}
	var rep reload.Report
	for _, c := range configs {
		got, err := read(c)
		if err != nil || got.revision != revisions[c.ID()] {
			continue
		}
		part := parts[c.ID()]
		part.Keys = reload.Fingerprints(key, got.values)
		rep.Configs = append(rep.Configs, part)
	}
	rep.Certificates = certReports(certs, key)
	if len(rep.Configs) == 0 && len(rep.Certificates) == 0 {
		return nil // nothing learnt yet, or each content is on its way out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err = r.post(ctx, token, rep)
	return err
}

// token reads the agent's token now (tokens rotate) and the key its
// fingerprints are made under.
func (r *reporter) token() (token, key []byte, err error) {
	token, err = os.ReadFile(r.spec.TokenFile)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the agent's token: %w", err)
	}
	token = bytes.TrimSpace(token)
	return token, reload.FingerprintKey(token), nil
}

// post sends rep as the pod and returns configward's answer.
func (r *reporter) post(ctx context.Context, token []byte, rep reload.Report) ([]byte, error) {
	body, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.spec.Report, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("configward answered %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	return msg, nil
}
