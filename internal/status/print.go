package status

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
)

// PrintTable writes the table a person reads at a glance: one row per
// workload, then a line for each workload whose pods will not get their
// new config by themselves or soon. allNamespaces adds the
// NAMESPACE column; wide the hashes.
func PrintTable(w io.Writer, res Result, allNamespaces, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"WORKLOAD", "CURRENT", "STALE", "STATE", "LAST CHANGE", "AGE"}
	if allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "WANTED", "TEMPLATE")
	}
	stamped := slices.DeleteFunc(slices.Clone(res.Items), func(it Item) bool { return it.State == HotOnly })
	if len(stamped) > 0 {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, it := range stamped {
		age := "-"
		if it.ChangedAt != nil {
			age = duration.HumanDuration(now.Sub(*it.ChangedAt))
		}
		row := []string{
			it.Kind + "/" + it.Name,
			fmt.Sprintf("%d/%d", it.Pods.Current, it.Pods.Current+it.Pods.Stale),
			fmt.Sprint(it.Pods.Stale),
			it.State,
			joinChanged(it.Changed),
			age,
		}
		if allNamespaces {
			row = append([]string{it.Namespace}, row...)
		}
		if wide {
			row = append(row, it.WantedHash, it.TemplateHash)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Items) == 0 {
		fmt.Fprintln(w, "No workloads with a config hash or hot config found.")
	}
	if err := printReloads(w, res, allNamespaces); err != nil {
		return err
	}
	if err := printCertificates(w, res, allNamespaces, now); err != nil {
		return err
	}
	if err := printSets(w, res, allNamespaces); err != nil {
		return err
	}
	// Notes under the table, one a line, each naming its workload.
	blank := false
	note := func(it Item, text string) {
		if !blank {
			fmt.Fprintln(w)
			blank = true
		}
		name := it.Kind + "/" + it.Name
		if allNamespaces {
			name = it.Namespace + "/" + name
		}
		fmt.Fprintf(w, "%s: %s\n", name, text)
	}
	for _, it := range res.Items {
		if it.State == "not-rolled" || it.State == "pending" || it.State == "rolled-back" || it.State == NotReported {
			note(it, it.Message)
		}
	}
	for _, it := range res.Items {
		if it.Unpinned != "" {
			note(it, "blocked: "+it.Unpinned)
		}
	}
	for _, it := range res.Items {
		for _, d := range it.Deliveries {
			note(it, d)
		}
	}
	for _, it := range res.Items {
		for _, h := range it.Reloads {
			for _, r := range h.Rejections {
				note(it, fmt.Sprintf("the program of pod %s rejected %s: %s", r.Pod, h.Config, r.Message))
			}
			// Only beside pods that have one: a workload that never asked
			// for the agent shows its pods in NO AGENT, and that is all.
			if n := h.Pods[reload.StateNoAgent]; n > 0 && n < h.Total() {
				note(it, fmt.Sprintf("%d pod(s) run no reload agent (created while configward's Pod path was down, or before the workload asked for it): nothing says which content of %s they applied", n, h.Config))
			}
		}
	}
	for _, it := range res.Items {
		if it.Certificates == nil {
			continue
		}
		for _, p := range it.Certificates.Stale {
			note(it, fmt.Sprintf("pod %s port %d presents certificate serial %s, mounts serial %s from %s: stale for %s",
				p.Pod, p.Port, p.Presented, p.Mounted, reload.CertSource(p.Secret, p.Certificate), duration.HumanDuration(now.Sub(p.Since))))
		}
	}
	for _, s := range res.Sets {
		if s.Condition != v1alpha1.ConditionReady && s.Message != "" {
			if !blank {
				fmt.Fprintln(w)
				blank = true
			}
			name := "ConfigSet/" + s.Name
			if allNamespaces {
				name = s.Namespace + "/" + name
			}
			fmt.Fprintf(w, "%s: %s\n", name, s.Message)
		}
	}
	for _, it := range res.Items {
		if len(it.Revisions) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nRevisions of %s/%s (pods by the revision they run):\n", it.Kind, it.Name)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tPODS\tAGE\tCONFIG HASH\tSNAPSHOTS")
		for _, r := range it.Revisions {
			snaps := r.Snapshots
			if snaps == "" {
				snaps = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", r.Revision, r.Pods, duration.HumanDuration(now.Sub(r.Created)), r.Hash, snaps)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// printReloads writes, under the first table, where each workload's pods
// stand with each hot config: one row per workload and config.
func printReloads(w io.Writer, res Result, allNamespaces bool) error {
	if !slices.ContainsFunc(res.Items, func(it Item) bool { return len(it.Reloads) > 0 }) {
		return nil
	}
	if slices.ContainsFunc(res.Items, func(it Item) bool { return it.State != HotOnly }) {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Hot config (reloaded in place; pods as their reload agents report):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"WORKLOAD", "CONFIG"}
	for _, s := range reload.States {
		header = append(header, strings.ToUpper(strings.ReplaceAll(string(s), "-", " ")))
	}
	if allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, it := range res.Items {
		for _, h := range it.Reloads {
			row := []string{it.Kind + "/" + it.Name, h.Config}
			for _, s := range reload.States {
				row = append(row, fmt.Sprint(h.Pods[s]))
			}
			if allNamespaces {
				row = append([]string{it.Namespace}, row...)
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	return tw.Flush()
}

// printCertificates writes, per workload whose pods' agents check ports,
// how many pods present the certificate they mount and when the earliest
// presented one ends.
func printCertificates(w io.Writer, res Result, allNamespaces bool, now time.Time) error {
	if !slices.ContainsFunc(res.Items, func(it Item) bool { return it.Certificates != nil }) {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Served certificates (pods by their worst port, as their reload agents read it):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"WORKLOAD"}
	for _, s := range reload.CertStates {
		header = append(header, strings.ToUpper(s))
	}
	header = append(header, "EXPIRES IN")
	if allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, it := range res.Items {
		if it.Certificates == nil {
			continue
		}
		row := []string{it.Kind + "/" + it.Name}
		for _, s := range reload.CertStates {
			row = append(row, fmt.Sprint(it.Certificates.Pods[s]))
		}
		expires := "-"
		if e := it.Certificates.Expires; e != nil {
			if expires = duration.HumanDuration(e.Sub(now)); !e.After(now) {
				expires = "expired"
			}
		}
		row = append(row, expires)
		if allNamespaces {
			row = append([]string{it.Namespace}, row...)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// printSets writes where each ConfigSet stands: a set waiting for its
// members, or stopped, has no delivery for a workload's line to show.
func printSets(w io.Writer, res Result, allNamespaces bool) error {
	if len(res.Sets) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Config sets (members delivered together):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"SET", "VERSION", "CONDITION", "REASON"}
	if allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, s := range res.Sets {
		reason := s.Reason
		if reason == "" {
			reason = "-"
		}
		row := []string{"ConfigSet/" + s.Name, s.Version, s.Condition, reason}
		if allNamespaces {
			row = append([]string{s.Namespace}, row...)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}
