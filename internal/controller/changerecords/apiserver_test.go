package changerecords_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

// The count of content changes that tells flapping config, against
// kube-apiserver and etcd alone (see framework.ControllerSuite): what the
// leader stores, announces and forgets. changerecords_test.go holds the
// decisions that need no cluster.

var suite = framework.NewControllerSuite(manager.Controller{RolloutBatchWindow: 500 * time.Millisecond, FlappingPass: 200 * time.Millisecond})

func TestAgainstAPIServer(t *testing.T) {
	suite.Run(t, "the change records against kube-apiserver and etcd")
}

var ctx = context.Background()

// recordsKey is where the leader stores the records.
var recordsKey = client.ObjectKey{Namespace: framework.Namespace, Name: manager.DefaultChangeRecords}

// records is the stored records ConfigMap (empty before the first store).
func records() *corev1.ConfigMap {
	var cm corev1.ConfigMap
	if err := suite.Env.Client.Get(ctx, recordsKey, &cm); err != nil {
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), err.Error())
	}
	return &cm
}

// storedRecord is the stored record of key (zero when there is none).
func storedRecord(key flapping.Key) func() flapping.Record {
	return func() flapping.Record {
		var r flapping.Record
		if v, ok := records().Data[key.String()]; ok {
			Expect(json.Unmarshal([]byte(v), &r)).To(Succeed())
		}
		return r
	}
}

// flappingAt is a namespace whose ConfigPolicy calls config flapping past
// one content change in window.
func flappingAt(name string, window time.Duration) string {
	return suite.PolicyNamespace(name, func(s *v1alpha1.ConfigPolicySpec) {
		s.Rollouts.Flapping = &v1alpha1.FlappingSettings{Changes: 1, Window: metav1.Duration{Duration: window}}
	})
}

func flappingGauge(kind, ns, name string) func() float64 {
	return func() float64 {
		return framework.Metric("configward_config_flapping", map[string]string{"kind": kind, "namespace": ns, "name": name})
	}
}

var _ = Describe("the change records", func() {
	It("count a Secret's content changes, not its metadata's, store when and by whom (never a value), announce the episode, and forget it once settled", func() {
		window := flapping.MinWindow
		ns := flappingAt("records-secret", window)
		values := []string{"CANARY-records-0", "CANARY-records-1", "CANARY-records-2"}
		creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"password": []byte(values[0])}}
		suite.Create(creds)
		key := flapping.Key{Kind: "Secret", Namespace: ns, Name: "creds"}

		By("a label changes, then the content twice")
		creds.Labels = map[string]string{"team": "payments"}
		Expect(suite.Env.Client.Update(ctx, creds)).To(Succeed())
		var versions []string
		for _, v := range values[1:] {
			creds.Data["password"] = []byte(v)
			Expect(suite.Env.Client.Update(ctx, creds, client.FieldOwner("secret-templater"))).To(Succeed())
			versions = append(versions, creds.ResourceVersion)
		}
		Eventually(storedRecord(key), 10*time.Second).Should(HaveField("Announced", BeTrue()))
		Expect(framework.Leaks(records(), values...)).To(BeEmpty())
		Expect(storedRecord(key)()).To(And(
			HaveField("Changes", HaveExactElements(HaveField("Version", versions[0]), HaveField("Version", versions[1]))),
			HaveField("Writer", "secret-templater"), HaveField("Since", Not(BeZero()))))
		// Events are sent on their own, a moment after the record says so.
		Eventually(framework.Events(suite.Env.Client, ns, "creds", "ConfigFlapping"), 5*time.Second).Should(ConsistOf(HavePrefix(
			`Secret/creds changed content 2 times in 10s (its threshold: more than 1 content changes in 10s), last written by "secret-templater"`)))
		Expect(flappingGauge("Secret", ns, "creds")()).To(Equal(1.0))

		By("unchanged for the window, it has settled: said once, and forgotten")
		Eventually(framework.Events(suite.Env.Client, ns, "creds", "ConfigStable"), window+10*time.Second).Should(HaveLen(1))
		Eventually(func() map[string]string { return records().Data }, 5*time.Second).ShouldNot(HaveKey(key.String()))
		Expect(flappingGauge("Secret", ns, "creds")()).To(BeZero())
		// The records were just stored again: counted, that write would be
		// a change to store at the next pass, and so on.
		Consistently(func() map[string]string { return records().Data }, time.Second).ShouldNot(
			HaveKey(flapping.Key{Kind: "ConfigMap", Namespace: recordsKey.Namespace, Name: recordsKey.Name}.String()),
			"the leader counts its own writes of the records")
	})

	It("go on from what the previous leader stored: what it announced is not announced again, what it had not is", func() {
		ns := flappingAt("records-restart", time.Minute)
		for _, name := range []string{"announced", "unannounced"} {
			suite.Create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"app.yaml": "salt: 0"}})
		}

		By("the leader stops; what it stored says both are flapping, one announced")
		suite.StopController()
		DeferCleanup(suite.StartController)
		now := time.Now().UTC()
		episode := func(writer string, announced bool) string {
			b, err := json.Marshal(flapping.Record{Changes: []flapping.Change{{At: now.Add(-2 * time.Second), Version: "1"}, {At: now.Add(-time.Second), Version: "2"}},
				Writer: writer, Since: now.Add(-time.Second), Announced: announced})
			Expect(err).NotTo(HaveOccurred())
			return string(b)
		}
		stored := records()
		if stored.Data == nil {
			stored.Data = map[string]string{}
		}
		stored.Data[flapping.Key{Kind: "ConfigMap", Namespace: ns, Name: "announced"}.String()] = episode("old-writer", true)
		stored.Data[flapping.Key{Kind: "ConfigMap", Namespace: ns, Name: "unannounced"}.String()] = episode("generator", false)
		if stored.ResourceVersion == "" {
			stored.Namespace, stored.Name = recordsKey.Namespace, recordsKey.Name
			suite.Create(stored)
		} else {
			Expect(suite.Env.Client.Update(ctx, stored)).To(Succeed())
		}

		By("the next leader starts")
		suite.StartController()
		Eventually(framework.Events(suite.Env.Client, ns, "unannounced", "ConfigFlapping"), 10*time.Second).Should(ConsistOf(
			ContainSubstring(`last written by "generator"`)))
		Eventually(flappingGauge("ConfigMap", ns, "announced"), 5*time.Second).Should(Equal(1.0))
		Expect(flappingGauge("ConfigMap", ns, "unannounced")()).To(Equal(1.0))
		Consistently(framework.Events(suite.Env.Client, ns, "announced", "ConfigFlapping"), 2*time.Second).Should(BeEmpty())
	})
})
