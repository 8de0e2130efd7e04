package changecontrol

import (
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/rules"
)

// HelmReleaseSecretType is the type of the Secrets Helm keeps release state
// in, and HelmReleaseSecretPrefix how Helm names them. They are Helm's
// bookkeeping, not configuration, and Helm (run by whoever installs a
// chart) must be able to create, update and delete them. Both the type and
// the name must match: a Secret's type is immutable, so no configuration
// Secret can be turned into one, and no one can re-create a workload's
// Secret under its own name as a "release".
const (
	HelmReleaseSecretType   corev1.SecretType = "helm.sh/release.v1"
	HelmReleaseSecretPrefix string            = "sh.helm.release.v1."
)

// Settings is what governs one namespace.
type Settings struct {
	// Governed is true when out-of-pipeline-edit applies in the namespace:
	// change control is configured (it needs pipeline identities) and
	// selects the namespace.
	Governed bool
	// Pipeline may change and delete governed config.
	Pipeline Identities
	// Configward are configward's own service accounts.
	Configward Identities
	// CertManager are cert-manager's controller service accounts; they may
	// change the Secrets cert-manager manages.
	CertManager Identities
	// Ignored is true when the namespace carries the label that keeps
	// configward's webhooks away from it (when the installation honours
	// one): nothing there is governed, whatever selects it.
	Ignored bool
}

// WithPipeline adds the pipeline identities the ConfigPolicies selecting the
// namespace name: a namespace for which any is named is governed.
func (s Settings) WithPipeline(fromPolicies Identities) Settings {
	if fromPolicies.Empty() || s.Ignored {
		return s
	}
	s.Pipeline = s.Pipeline.Merge(fromPolicies)
	s.Governed = true
	return s
}

// Request is a CREATE, UPDATE or DELETE of a ConfigMap or Secret.
type Request struct {
	Operation string // "CREATE", "UPDATE" or "DELETE"
	User      authenticationv1.UserInfo
	Kind      string // "ConfigMap", "Secret" or "ConfigSchema"
	Namespace string
	Name      string
	// Old is the stored object (nil on CREATE), New the object after the
	// write (nil on DELETE).
	Old, New *Content
	// NamespaceTerminating is true while the namespace is being deleted.
	NamespaceTerminating bool
	// Consumers are the live workloads that reference the object, as
	// "Kind name" (DELETE only); see Live.
	Consumers []string
	// Snapshotted: the namespace keeps config revisions of objects of this
	// kind, so revisions of its consumers name snapshots of it.
	Snapshotted bool
	// ChannelWaves are the waves of the namespace's delivery, whose
	// channels only configward writes (nil where delivery is off).
	ChannelWaves []v1alpha1.Wave
}

// Verdict is what change control says about a request.
type Verdict struct {
	// Exempt, when set, says why the request was not judged at all.
	Exempt string
	// Refused, when set, refuses the request whatever the policies say: a
	// config snapshot is configward's alone to write and delete.
	Refused string
	// Changed lists the content and governing fields a create or update
	// sets or changes, e.g. `data["log-level"]`, `immutable`,
	// `metadata.ownerReferences` (names only, never values).
	Changed []string
	// BreakGlass is the reason of a break-glass change, when it is one.
	BreakGlass string
	// Findings are the rules' findings; their action comes from the
	// policy (rules.Settings.ActionFor).
	Findings []rules.Finding
}

// Decide judges one request.
func Decide(s Settings, r Request) Verdict {
	if why, ok := neverBlocked(s, r); ok {
		return Verdict{Exempt: why}
	}
	if refused := snapshotWrite(r); refused != "" {
		return Verdict{Refused: refused}
	}
	if refused := channelWrite(r); refused != "" {
		return Verdict{Refused: refused}
	}
	pipeline := s.Pipeline.Includes(r.User)
	var v Verdict
	what := fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name)
	switch r.Operation {
	case "CREATE", "UPDATE":
		v.Changed = Changes(r.Old, r.New)
		if !s.Governed {
			return v
		}
		if reason := newBreakGlass(r.Old, r.New); reason != "" {
			// Every new reason is recorded with who set it, the pipeline's
			// and one set alone included: a delivery of the content that
			// carries it skips approvals (internal/delivery, BreakGlass).
			v.BreakGlass = reason
			return v
		}
		if len(v.Changed) == 0 || pipeline {
			return v
		}
		msg := fmt.Sprintf("%s changes %s of %s outside the pipeline. Make the change in version control and let the pipeline apply it; in an emergency, repeat the edit with a new annotation %s: \"<reason>\" (the edit is recorded).",
			r.User.Username, list(v.Changed), what, v1alpha1.BreakGlassAnnotation)
		if r.Operation == "CREATE" {
			// A create is how governed config deleted by any route (the
			// garbage collector, a break-glass delete) would come back with
			// other content.
			msg = fmt.Sprintf("%s creates %s outside the pipeline. Create it through the pipeline; in an emergency, create it with an annotation %s: \"<reason>\" (the creation is recorded).",
				r.User.Username, what, v1alpha1.BreakGlassAnnotation)
		}
		v.Findings = append(v.Findings, rules.Finding{Rule: rules.OutOfPipelineEdit, Path: strings.Join(v.Changed, ", "), Message: msg})
	case "DELETE":
		if s.Governed && !pipeline {
			if reason := r.Old.annotation(v1alpha1.BreakGlassDeleteAnnotation); reason != "" {
				v.BreakGlass = reason
			} else {
				v.Findings = append(v.Findings, rules.Finding{
					Rule: rules.OutOfPipelineEdit,
					Message: fmt.Sprintf("%s deletes %s outside the pipeline. Delete it through the pipeline; in an emergency, first annotate it with %s: \"<reason>\", then delete it (the delete is recorded).",
						r.User.Username, what, v1alpha1.BreakGlassDeleteAnnotation),
				})
			}
		}
		if len(r.Consumers) > 0 && !r.NamespaceTerminating {
			f := rules.Finding{
				Rule: rules.ConfigInUseDelete,
				Message: fmt.Sprintf("%s is used by %s: their pods fail to start or to refresh it once it is gone. Remove the references (or the workloads) first.",
					what, countedList(r.Consumers, 3)),
			}
			if r.Snapshotted {
				f.Message = fmt.Sprintf("%s is used by %s. Running pods keep what they read; pods of a revision that names a snapshot of it "+
					"(revisions are on here) go on reading that snapshot, new and scaled-up ones and rollbacks included, and configward "+
					"rolls none of them onto the missing object; pods of a revision without one cannot start. Remove the references (or the workloads) first.",
					what, countedList(r.Consumers, 3))
			}
			if pipeline {
				// Admission sees one request of a change set at a time and
				// cannot tell whether the same change set deletes the
				// consumers next (kubectl delete -f goes in file order), so
				// the pipeline is told, not stopped.
				f.Action = rules.Warn
			}
			v.Findings = append(v.Findings, f)
		}
	}
	return v
}

// snapshotWrite refuses a write or delete of a config snapshot (or a write
// that makes an object look like one) by anyone but configward: pods of a
// revision read its bytes, so neither the pipeline nor a person may change
// or remove it while it is in use, and configward deletes it once it is not.
// Kubernetes' own controllers (namespace deletion, garbage collection) and
// configward were let through before.
func snapshotWrite(r Request) string {
	var of string
	for _, c := range []*Content{r.Old, r.New} {
		if c == nil {
			continue
		}
		if o, ok := revision.SnapshotOf(c.Labels, c.Annotations); ok {
			of = o
		}
	}
	if of == "" {
		return ""
	}
	verb := map[string]string{"CREATE": "create", "UPDATE": "change", "DELETE": "delete"}[r.Operation]
	return fmt.Sprintf("[config-revision] %s %s/%s is configward's snapshot of %s %s: the pods of a revision read exactly its bytes, so only configward's controller writes snapshots, and it deletes them once no workload, ReplicaSet, ControllerRevision, Job or pod names them. %s may not %s it. "+
		"To change config, change %s %s; to go back, roll the workload back (kubectl rollout undo).",
		r.Kind, r.Namespace, r.Name, r.Kind, of, r.User.Username, verb, r.Kind, of)
}

// channelWrite refuses a write or delete of a channel of hot config (or a
// write that makes an object look like one) by anyone but configward: a
// channel holds what its wave's pods should run now, and a change written
// into it would reach them past the delivery's waves and gates. Kubernetes'
// own controllers and configward were let through before.
func channelWrite(r Request) string {
	var of, wave string
	marked := false
	for _, c := range []*Content{r.Old, r.New} {
		if c == nil {
			continue
		}
		if o, w, ok := channel.Of(c.Labels, c.Annotations); ok {
			of, wave = o, w
		}
		marked = marked || c.Labels[v1alpha1.ChannelLabel] != ""
	}
	verb := map[string]string{"CREATE": "create", "UPDATE": "change", "DELETE": "delete"}[r.Operation]
	if wave, named := channel.Named(r.Name, r.ChannelWaves); named && of == "" && r.Operation != "DELETE" {
		// Written first, an object of a channel's name would keep
		// configward from writing the channel, and the wave's pods would
		// read it instead.
		return fmt.Sprintf("[config-delivery] %s %s/%s has the name of a channel of hot config for wave %s: in a namespace where config is delivered in waves, "+
			"only configward's controller writes objects named <config>-ch-<wave>, the channels the pods of each wave read. %s may not %s it; choose another name.",
			r.Kind, r.Namespace, r.Name, wave, r.User.Username, verb)
	}
	switch {
	case of != "":
		return fmt.Sprintf("[config-delivery] %s %s/%s is configward's channel of %s %s for wave %s: the pods of that wave read it, and only configward's controller writes it, "+
			"wave by wave, so that a change reaches them through the delivery's gates. %s may not %s it. To change config, change %s %s.",
			r.Kind, r.Namespace, r.Name, r.Kind, of, wave, r.User.Username, verb, r.Kind, of)
	case marked:
		return fmt.Sprintf("[config-delivery] %s %s/%s carries the label %s, which marks configward's channels of hot config: only configward's controller writes channels. "+
			"%s may not %s it with that label. Remove metadata.labels[%q] from the object.",
			r.Kind, r.Namespace, r.Name, v1alpha1.ChannelLabel, r.User.Username, verb, v1alpha1.ChannelLabel)
	}
	return ""
}

// neverBlocked names the writers change control lets through without
// judging: Kubernetes' own components, configward itself, Helm's release
// bookkeeping, and cert-manager on the Secrets that are its own. Each is
// matched by the authenticated identity and, where it is not enough, by
// what the object already is, never by what the request claims it becomes.
func neverBlocked(s Settings, r Request) (string, bool) {
	if why, ok := KubernetesWriter(r.User); ok {
		return why, true
	}
	if s.Configward.Includes(r.User) {
		return "configward itself", true
	}
	if r.Kind != "Secret" {
		return "", false
	}
	// The object as it stands before the request: the stored one, or on a
	// create the new one (nothing stands yet).
	before := r.Old
	if r.Operation == "CREATE" {
		before = r.New
	}
	if before != nil && before.Type == HelmReleaseSecretType && strings.HasPrefix(r.Name, HelmReleaseSecretPrefix) {
		return "a Helm release Secret", true
	}
	// cert-manager may write a Secret only if it is already cert-manager's:
	// on an update, the stored object must carry the Certificate's name (so
	// no one can make cert-manager overwrite a governed Secret by pointing
	// a Certificate at it); on a create, the new one (cert-manager issuing).
	if s.CertManager.Includes(r.User) && before.ManagedByCertManager() {
		return "cert-manager writing a Secret it manages", true
	}
	return "", false
}

// newBreakGlass returns the break-glass reason a create or update sets, if
// it sets one the object did not already carry: a reason is good for one
// edit.
func newBreakGlass(old, new *Content) string {
	var was, now map[string]string
	if old != nil {
		was = old.Annotations
	}
	if new != nil {
		now = new.Annotations
	}
	return NewBreakGlass(was, now)
}

// NewBreakGlass is the break-glass reason a write whose object had the
// annotations was and has now sets, "" unless it sets one the object did
// not already carry. Change control records the write for it, and the
// admission webhook seals it to the write's content
// (delivery.BreakGlassSeal): both ask here.
func NewBreakGlass(was, now map[string]string) string {
	reason := strings.TrimSpace(now[v1alpha1.BreakGlassAnnotation])
	if reason == "" || reason == strings.TrimSpace(was[v1alpha1.BreakGlassAnnotation]) {
		return ""
	}
	return reason
}

func list(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// countedList names the first n items and counts the rest.
func countedList(items []string, n int) string {
	if len(items) <= n {
		return list(items)
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
