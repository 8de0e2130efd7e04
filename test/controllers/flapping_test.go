package controllers

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/test/framework"
)

var _ = Describe("flapping config", func() {
	It("stops rolling the consumers of a ConfigMap past its threshold, names the writer, keeps the count across a restart, and rolls once when it has settled", func() {
		window := 30 * time.Second
		ns := flappingNamespace("flapping", 2, window, nil)
		cm := configMap(ns, "cfg", "salt: 0")
		create(cm)
		d := deployment(ns, "web", "cfg")
		d.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: hashOf(cm)}
		create(d)

		By("two changes within the window roll the workload as usual")
		writeAs(cm, "salt: 1", "secret-templater")
		Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)))
		writeAs(cm, "salt: 2", "secret-templater")
		Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)))
		rolled := hashOf(cm)

		By("the third makes it flapping: no rollout, an Event naming the writer, the workload's hold")
		writeAs(cm, "salt: 3", "secret-templater")
		Eventually(events(ns, "cfg", "ConfigFlapping"), 10*time.Second).Should(ConsistOf(
			HavePrefix(`ConfigMap/cfg changed content 3 times in 30s (its threshold: more than 2 content changes in 30s), last written by "secret-templater": configward stops rolling its consumers`)))
		Eventually(events(ns, "web", "ConfigChangedNotRolled"), 10*time.Second).Should(ConsistOf(
			`ConfigMap/cfg changed, but ConfigMap/cfg is flapping (more than 2 content changes in 30s; last written by "secret-templater"; see its ConfigFlapping Event): running pods keep the config they run until it has been unchanged for 30s`))
		Consistently(templateHash(d), 3*time.Second).Should(Equal(rolled))
		Eventually(results(d), 10*time.Second).Should(ContainElement("config-current fail not-rolled"))
		Eventually(configCurrentReason(d), 10*time.Second).Should(Equal("flapping"))

		By("the count is stored where a restart of the controller finds it")
		Eventually(storedRecord(ns, "cfg"), 10*time.Second).Should(HaveField("Since", Not(BeZero())))
		Expect(stopController()).To(Succeed())
		startSuiteController()
		writeAs(cm, "salt: 4", "secret-templater")
		Consistently(templateHash(d), 4*time.Second).Should(Equal(rolled), "a restarted controller counted from zero")

		By("once it has been unchanged for the window, the held consumers roll once, to the content it settled on")
		Eventually(templateHash(d), window+15*time.Second).Should(Equal(hashOf(cm)))
		Eventually(events(ns, "cfg", "ConfigStable"), 10*time.Second).Should(HaveLen(1))
		Eventually(storedRecord(ns, "cfg"), 10*time.Second).Should(HaveField("Since", BeZero()))
	})

	It("does not count a hot ConfigMap's changes: they roll nothing to hold", func() {
		ns := namespace(nil)
		cm := configMap(ns, "live", "salt: 0")
		cm.Annotations = map[string]string{v1alpha1.ReloadAnnotation: "hot"}
		create(cm)
		for i := 1; i <= 5; i++ {
			writeAs(cm, fmt.Sprintf("salt: %d", i), "secret-templater")
		}
		Consistently(events(ns, "live", "ConfigFlapping"), 4*time.Second).Should(BeEmpty())
		Expect(storedRecord(ns, "live")().Changes).To(BeEmpty())
	})

	It("takes no snapshot and starts no delivery for config that flaps, and delivers the content it settles on", func() {
		window := 15 * time.Second
		ns := flappingNamespace("flapping-delivery", 1, window, func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions = v1alpha1.RevisionSettings{Enabled: true}
			s.Delivery = &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary", Percent: new(int32(50))}, {Name: "rest"}}}
		})
		cm := configMap(ns, "cfg", "salt: 0")
		create(cm)
		for _, name := range []string{"a", "b"} {
			d := deployment(ns, name, "cfg")
			d.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: hashOf(cm)}
			create(d)
		}
		// Two changes inside the batch window: the second makes it flapping
		// before a delivery of the first could start.
		writeAs(cm, "salt: 1", "secret-templater")
		writeAs(cm, "salt: 2", "secret-templater")
		Eventually(events(ns, "cfg", "ConfigFlapping"), 10*time.Second).Should(HaveLen(1))
		Consistently(func() int { return len(configDeliveries(ns)) }, 4*time.Second).Should(BeZero())
		Expect(configMapNames(ns)()).To(ConsistOf("cfg"), "a snapshot of flapping content was written")

		By("settled, its content is delivered once")
		Eventually(func() int { return len(configDeliveries(ns)) }, window+15*time.Second).Should(Equal(1))
		Eventually(configMapNames(ns), 10*time.Second).Should(HaveLen(2))
	})

	It("holds the delivery of hot config that flaps where delivery is on: its channels keep their content, and it delivers the content it settles on", func() {
		window := 15 * time.Second
		ns := flappingNamespace("flapping-hot", 1, window, func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions = v1alpha1.RevisionSettings{Enabled: true}
			s.Delivery = &v1alpha1.DeliverySettings{SoakSeconds: new(int32(0)), Waves: []v1alpha1.Wave{{Name: "canary"}, {Name: "rest"}}}
		})
		cm := configMap(ns, "live", "salt: 0")
		cm.Annotations = map[string]string{v1alpha1.ReloadAnnotation: "hot"}
		create(cm)
		Eventually(channelValues(ns, "live"), 10*time.Second).Should(Equal(map[string]string{"canary": "salt: 0", "rest": "salt: 0"}))
		writeAs(cm, "salt: 1", "secret-templater")
		writeAs(cm, "salt: 2", "secret-templater")
		Eventually(events(ns, "live", "ConfigFlapping"), 10*time.Second).Should(HaveLen(1))
		Consistently(func() int { return len(configDeliveries(ns)) }, 4*time.Second).Should(BeZero())
		Expect(channelValues(ns, "live")()).To(Equal(map[string]string{"canary": "salt: 0", "rest": "salt: 0"}), "flapping content reached a channel")

		By("settled, its content is delivered once, wave by wave")
		Eventually(func() int { return len(configDeliveries(ns)) }, window+15*time.Second).Should(Equal(1))
		Eventually(channelValues(ns, "live"), 20*time.Second).Should(Equal(map[string]string{"canary": "salt: 2", "rest": "salt: 2"}))
		Expect(configDeliveries(ns)[0].Spec.Hot).To(BeTrue())
	})
})

func configDeliveries(ns string) []v1alpha1.ConfigDelivery {
	var list v1alpha1.ConfigDeliveryList
	Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// channelValues maps each wave to the value its channel of ConfigMap cm
// holds.
func channelValues(ns, cm string) func() map[string]string {
	return channelsOf(ns, cm, &corev1.ConfigMapList{})
}

// channelsOf maps each wave to the value its channel of the ConfigMap or
// Secret called original holds: channels of list's kind.
func channelsOf(ns, original string, list client.ObjectList) func() map[string]string {
	return func() map[string]string {
		l := list.DeepCopyObject().(client.ObjectList)
		Expect(env.Client.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ChannelLabel: "true"})).To(Succeed())
		items, err := meta.ExtractList(l)
		Expect(err).NotTo(HaveOccurred())
		out := map[string]string{}
		for _, item := range items {
			c := item.(client.Object)
			if c.GetAnnotations()[v1alpha1.ChannelOfAnnotation] != original {
				continue
			}
			value := ""
			switch o := c.(type) {
			case *corev1.ConfigMap:
				value = o.Data[configKey]
			case *corev1.Secret:
				value = string(o.Data[configKey])
			}
			out[c.GetAnnotations()[v1alpha1.ChannelWaveAnnotation]] = value
		}
		return out
	}
}

func configMapNames(ns string) func() []string {
	return func() []string {
		var list corev1.ConfigMapList
		Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, cm := range list.Items {
			out = append(out, cm.Name)
		}
		return out
	}
}

// flappingNamespace creates a namespace and a ConfigPolicy named name that
// selects it alone, with the flapping threshold given and what more sets.
func flappingNamespace(name string, changes int32, window time.Duration, more func(*v1alpha1.ConfigPolicySpec)) string {
	return policyNamespace(name, func(s *v1alpha1.ConfigPolicySpec) {
		s.Rollouts.Flapping = &v1alpha1.FlappingSettings{Changes: changes, Window: metav1.Duration{Duration: window}}
		if more != nil {
			more(s)
		}
	})
}

// configCurrentReason is the hold reason of the config-current result of
// the Report configward keeps on obj.
func configCurrentReason(obj client.Object) func() string {
	return func() string {
		var r openreports.Report
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: report.Name(obj.GetUID())}, &r); err != nil {
			return ""
		}
		for _, res := range r.Results {
			if res.Rule == report.ConfigCurrent {
				return res.Properties[report.PropReason]
			}
		}
		return ""
	}
}

// writeAs changes the ConfigMap's one value as field manager.
func writeAs(cm *corev1.ConfigMap, value, manager string) {
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	cm.Data[configKey] = value
	Expect(env.Client.Update(ctx, cm, client.FieldOwner(manager))).To(Succeed())
}

// storedRecord is the controller's stored record of a ConfigMap's changes
// (zero when there is none).
func storedRecord(ns, name string) func() flapping.Record {
	return func() flapping.Record {
		var stored corev1.ConfigMap
		key := client.ObjectKey{Namespace: framework.Namespace, Name: manager.DefaultChangeRecords}
		if err := env.Client.Get(ctx, key, &stored); err != nil {
			return flapping.Record{}
		}
		var r flapping.Record
		if v, ok := stored.Data[flapping.Key{Kind: "ConfigMap", Namespace: ns, Name: name}.String()]; ok {
			Expect(json.Unmarshal([]byte(v), &r)).To(Succeed())
		}
		return r
	}
}

// External Secrets Operator's own controller writes the Secrets here, from
// its fake provider, refreshing every second: one ExternalSecret with a
// template whose output is stable, one whose output carries a fresh UUID
// on every refresh (as an htpasswd/bcrypt template with a random salt
// does).
var _ = Describe("Secrets External Secrets Operator writes", func() {
	It("rolls nothing for a stable template's refreshes, and catches a salted template as flapping, naming ESO's field manager", func() {
		framework.RequireExternalSecrets(GinkgoT())
		eso, err := env.StartExternalSecrets()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(eso.Stop)

		window := 15 * time.Second
		ns := flappingNamespace("eso-flapping", 2, window, nil)

		applyYAML(fmt.Sprintf(`apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: fake, namespace: %s}
spec:
  provider:
    fake:
      data:
      - {key: db-password, value: hunter2}`, ns))
		externalSecret := func(name, template string) string {
			return fmt.Sprintf(`apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  refreshInterval: 1s
  secretStoreRef: {kind: SecretStore, name: fake}
  target:
    name: %[2]s
    template:
      data:
        config.yaml: |
%[3]s
  data:
  - secretKey: password
    remoteRef: {key: db-password}`, ns, name, template)
		}
		applyYAML(externalSecret("stable", "          password: {{ .password }}"))
		applyYAML(externalSecret("salted", "          password: {{ .password }}\n          salt: {{ uuidv4 }}"))
		for _, name := range []string{"stable", "salted"} {
			Eventually(func() error {
				return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
			}, 30*time.Second).Should(Succeed())
		}

		steady := secretDeployment(ns, "steady", "stable")
		create(steady)
		stableHash := templateHash(steady)()

		By("a stable template: ESO refreshes every second, nothing rolls")
		Consistently(templateHash(steady), 6*time.Second).Should(Equal(stableHash))

		By("a salted template: flapping, named by ESO's field manager, its consumer held")
		salty := secretDeployment(ns, "salty", "salted")
		create(salty)
		Eventually(events(ns, "salted", "ConfigFlapping"), 20*time.Second).Should(ConsistOf(
			ContainSubstring(`last written by "externalsecrets.external-secrets.io/salted"`)))
		Eventually(events(ns, "salty", "ConfigChangedNotRolled"), 10*time.Second).Should(HaveLen(1))
		held := templateHash(salty)()
		before := resourceVersion(ns, "salted")
		Consistently(templateHash(salty), 5*time.Second).Should(Equal(held))
		Expect(resourceVersion(ns, "salted")).NotTo(Equal(before), "ESO stopped rewriting the salted Secret: the hold proved nothing")
		Expect(events(ns, "salted", "ConfigFlapping")()).To(HaveLen(1), "one Event per episode")

		By("the template made stable: once unchanged for the window, the consumer rolls once")
		applyYAML(externalSecret("salted", "          password: {{ .password }}"))
		Eventually(events(ns, "salted", "ConfigStable"), window+20*time.Second).Should(HaveLen(1))
		Eventually(templateHash(salty), 10*time.Second).ShouldNot(Equal(held))
		Expect(templateHash(steady)()).To(Equal(stableHash))
	})
})

// secretDeployment mounts Secret s as a volume, stamped with the hash of
// its current content, as the webhook would have.
func secretDeployment(ns, name, s string) *appsv1.Deployment {
	var secret corev1.Secret
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s}, &secret)).To(Succeed())
	key, err := env.HashKey(ctx)
	Expect(err).NotTo(HaveOccurred())
	hash := digest.PodTemplateHash(key, ns, []digest.Entry{{Kind: "Secret", Name: s, Content: digest.Content(digest.SecretKeyDigests(secret.Data), nil)}})
	d := deployment(ns, name, "unused")
	d.Spec.Template.Spec.Containers[0].EnvFrom = nil
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s}}}}
	d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/etc/app"}}
	d.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: hash}
	return d
}

func resourceVersion(ns, secret string) string {
	var s corev1.Secret
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, &s)).To(Succeed())
	return s.ResourceVersion
}

// applyYAML creates one object written as YAML, or replaces the spec of
// the one stored.
func applyYAML(doc string) {
	var u unstructured.Unstructured
	Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
	err := env.Client.Create(ctx, &u)
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
		return
	}
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(u.GroupVersionKind())
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&u), stored)).To(Succeed())
	stored.Object["spec"] = u.Object["spec"]
	Expect(env.Client.Update(ctx, stored)).To(Succeed())
}
