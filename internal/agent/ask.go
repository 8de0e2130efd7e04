package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/configward/configward/internal/reload"
)

// Nothing in Kubernetes swaps several volumes at once: the kubelet swaps
// each ConfigMap and Secret volume from its own cache, so while a change
// set's channels land, a pod that mounts two of them may hold one new and
// one old. Before it triggers a reload of such a pod, the agent asks
// configward, as the pod, whether the configs on disk hold one set
// (reload.Report.Ask). It learns what each should hold without reading the
// API and without a file the program could read: configward compares the
// fingerprints with the channels' notes and answers. While the configs do
// not hold one set the reload waits; a program that watches its files
// reloads by itself, and then the agent waits to say what it applied.

// asker asks configward; the reporter is one.
type asker interface {
	ask(ctx context.Context, configs []reload.Config) (reload.Answer, map[string]string, error)
}

// setGate decides whether a reload may be triggered now.
type setGate struct {
	asker   asker
	log     logr.Logger
	maxWait time.Duration
	// members are the configs configward last said are bound to others
	// in a set: while configward cannot be asked, their swaps wait.
	members map[string]bool
	// next is when configward may be asked again, wait the time before it.
	next time.Time
	wait time.Duration
}

// open says whether the program may be reloaded on what is on disk now.
// A pod with one config cannot read a mix: it is not asked about. It
// records on each state the set its content belongs to.
func (g *setGate) open(ctx context.Context, states []*state, swapped []*state) bool {
	if len(states) < 2 {
		return true
	}
	now := time.Now()
	if now.Before(g.next) {
		return false
	}
	configs := make([]reload.Config, len(states))
	for i, s := range states {
		configs[i] = s.config
	}
	ans, asked, err := g.asker.ask(ctx, configs)
	switch {
	case err != nil:
		for _, s := range swapped {
			if g.members[s.config.ID()] {
				g.later(now)
				g.log.Info("a swapped config is in a set and configward cannot be asked whether its set is whole: the reload waits", "config", s.config.ID(), "error", err.Error())
				return false
			}
		}
		// Configs never said to be in a set reload as they always did.
		return true
	case !ans.Holds:
		g.learn(ans)
		g.later(now)
		g.log.Info("the configs on disk do not hold one set yet: the reload waits", "waitingFor", ans.WaitingFor)
		return false
	}
	// A swap since the question makes it moot: the next look asks again.
	for _, s := range states {
		if revisionOf(s.config.Dir) != asked[s.config.ID()] {
			return false
		}
	}
	g.learn(ans)
	g.wait, g.next = 0, time.Time{}
	for _, s := range states {
		s.set = ans.Sets[s.config.ID()]
	}
	return true
}

func (g *setGate) learn(ans reload.Answer) {
	g.members = map[string]bool{}
	for c := range ans.Sets {
		g.members[c] = true
	}
}

// later puts the next question off: twice the last wait, up to maxWait.
func (g *setGate) later(now time.Time) {
	g.wait = min(max(2*g.wait, time.Second), g.maxWait)
	g.next = now.Add(g.wait)
}

// ask asks configward whether configs, as they are on disk now, hold one
// set; it returns the answer and the revision of each config it asked
// about.
func (r *reporter) ask(ctx context.Context, configs []reload.Config) (reload.Answer, map[string]string, error) {
	token, key, err := r.token()
	if err != nil {
		return reload.Answer{}, nil, err
	}
	q := reload.Report{Ask: true}
	asked := map[string]string{}
	for _, c := range configs {
		got, err := read(c)
		if err != nil {
			return reload.Answer{}, nil, fmt.Errorf("reading %s: %w", c.ID(), err)
		}
		asked[c.ID()] = got.revision
		q.Configs = append(q.Configs, reload.ConfigReport{Config: c.ID(), Keys: reload.Fingerprints(key, got.values), AllKeys: c.Items == nil, SwappedAt: got.swappedAt})
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := r.post(ctx, token, q)
	if err != nil {
		return reload.Answer{}, nil, err
	}
	var ans reload.Answer
	if err := json.Unmarshal(body, &ans); err != nil || ans.Outcome != reload.Asked {
		return reload.Answer{}, nil, fmt.Errorf("configward's answer is not one: %.100q", body)
	}
	return ans, asked, nil
}
