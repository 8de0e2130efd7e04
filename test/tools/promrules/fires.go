package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/tsdb"
)

// firesCase is what `promrules fires` reads.
type firesCase struct {
	Rules   string `json:"rules"`
	Time    int64  `json:"time"`
	Samples []struct {
		Labels map[string]string `json:"labels"`
		Value  float64           `json:"value"`
	} `json:"samples"`
}

func fires(input []byte, p parser.Parser, out io.Writer) error {
	var c firesCase
	if err := json.Unmarshal(input, &c); err != nil {
		return fmt.Errorf("reading the case: %w", err)
	}
	groups, errs := rulefmt.Parse([]byte(c.Rules), false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return fmt.Errorf("%d errors in the rules: %v", len(errs), errs)
	}
	dir, err := os.MkdirTemp("", "promrules-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := tsdb.Open(dir, slog.New(slog.DiscardHandler), nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		return err
	}
	defer db.Close()
	at := time.Unix(c.Time, 0)
	app := db.Appender(context.Background())
	for _, s := range c.Samples {
		if _, err := app.Append(0, labels.FromMap(s.Labels), at.UnixMilli(), s.Value); err != nil {
			return err
		}
	}
	if err := app.Commit(); err != nil {
		return err
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, Parser: p})
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			q, err := engine.NewInstantQuery(context.Background(), db, nil, r.Expr, at)
			if err != nil {
				return fmt.Errorf("%s: %w", r.Alert, err)
			}
			res := q.Exec(context.Background())
			if res.Err != nil {
				return fmt.Errorf("%s: %w", r.Alert, res.Err)
			}
			if v, ok := res.Value.(promql.Vector); ok && len(v) > 0 {
				fmt.Fprintln(out, r.Alert)
			}
			q.Close()
		}
	}
	return nil
}
