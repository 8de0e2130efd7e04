package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/configward/configward/internal/configpolicy"
)

// where is an object's kind, name and start, for comparing loads.
func where(o Object) string {
	return fmt.Sprintf("%d:%d %s %s", o.Line, o.Column, o.Obj.GetObjectKind().GroupVersionKind().Kind, o.Obj.GetName())
}

// runCheck checks objs with the built-in rules, as check does without
// --policy.
func runCheck(t *testing.T, objs []Object, opts Options) []Result {
	t.Helper()
	store, err := configpolicy.New(context.Background(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(context.Background(), store.Current(), objs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return results
}

func TestListsAreCheckedItemByItem(t *testing.T) {
	const file = "testdata/lists/lists.yaml"
	objs, err := Load([]string{file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, where(o))
	}
	// Each item where it starts; a typed list's items take its kind; the
	// nested List's item is found too; the Widget and the empty
	// SecretList give nothing.
	want := []string{
		"7:3 ConfigMap flags", "11:3 Deployment checkout",
		"28:3 ConfigMap a", "30:3 ConfigMap b",
		"38:5 ConfigMap nested",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("loaded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Items are judged together like top-level objects: the hot ConfigMap
	// in the List makes the Deployment's subPath mount a denial, reported
	// at the mount inside the item.
	var found []string
	for _, r := range runCheck(t, objs, Options{}) {
		found = append(found, fmt.Sprintf("%s:%d:%d %s %s", r.File, r.Line, r.Column, r.Action, r.Rule))
	}
	if want := file + ":22:26 Deny subpath-config"; len(found) != 1 || found[0] != want {
		t.Fatalf("findings %q, want only %q", found, want)
	}
}

func TestListsInJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "list.json")
	if err := os.WriteFile(file, []byte(`{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "two"}}
  ]
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := Load([]string{file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || where(objs[0]) != "5:5 ConfigMap one" || where(objs[1]) != "6:5 ConfigMap two" {
		t.Fatalf("loaded %v", objs)
	}
}

// A document without a kind is refused without quoting it: the decoder's own
// message holds the whole document, and it may be a Secret.
func TestErrorsDoNotQuoteTheDocument(t *testing.T) {
	for _, manifest := range []string{
		"apiVersion: v1\nmetadata: {name: db}\nstringData: {password: CANARY-check}\n",
		"kind: Secret\nmetadata: {name: db}\nstringData: {password: CANARY-check}\n",
		"apiVersion: v1\nkind: List\nitems:\n- {metadata: {name: db}, stringData: {password: CANARY-check}}\n",
		// YAML errors that quote values (FuzzLoadManifests).
		"apiVersion: v1\nkind: Secret\nstringData:\n  {password: CANARY-check}: x\n",
		"apiVersion: v1\nkind: Secret\nstringData:\n  [CANARY-check]: x\n",
		"apiVersion: v1\nkind: Secret\nstringData:\n  ~: CANARY-check\n",
		"apiVersion: v1\nkind: Secret\nstringData:\n  password: !!int CANARY-check\n",
	} {
		_, err := Load([]string{"-"}, strings.NewReader(manifest))
		if err == nil || strings.Contains(err.Error(), "CANARY") {
			t.Errorf("error %v: want one that does not quote the document", err)
		}
	}
}

func TestListErrorsNameFileLineAndIndex(t *testing.T) {
	for name, tc := range map[string]struct{ manifest, want string }{
		"an item that is not an object": {
			"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- just a string\n",
			"<stdin>:7: items[1] of List is not an object",
		},
		"a null item": {
			"# comment\napiVersion: v1\nkind: ConfigMapList\nitems:\n-\n",
			"<stdin>:5: items[0] of ConfigMapList is not an object",
		},
		"items that are not a list": {
			"apiVersion: v1\nkind: List\nitems: {a: b}\n",
			"<stdin>:1: List: items is not a list",
		},
		"an item that is not a Kubernetes object": {
			"apiVersion: v1\nkind: List\nitems:\n- {metadata: {name: a}}\n",
			"<stdin>:4: not a Kubernetes object: it has no kind or no apiVersion",
		},
	} {
		_, err := Load([]string{"-"}, strings.NewReader(tc.manifest))
		if _, ok := err.(InputError); !ok || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want an InputError with %q", name, err, tc.want)
		}
	}
}

func TestFindingsPointAtTheirField(t *testing.T) {
	// Two documents, so lines count from the file's start, not the
	// document's.
	const manifest = `apiVersion: v1
kind: ConfigMap
metadata: {name: first}
data: {app.yaml: "a: b"}
---
# anchors and merges are followed to where the field is written
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - &api
        name: api
        env:
        - name: A
          value: a
        - name: B
          valueFrom:
            secretKeyRef: {name: db, key: b}
      - <<: *api
        name: sidecar
      volumes:
      - name: data.d
        configMap: {name: x}
`
	objs, err := Load([]string{"-"}, strings.NewReader(manifest))
	if err != nil {
		t.Fatal(err)
	}
	// A key in brackets, dots and all.
	if line, column := objs[0].position("data[app.yaml]"); line != 4 || column != 8 {
		t.Errorf("data[app.yaml] at %d:%d, want 4:8", line, column)
	}
	deploy := objs[1]
	if where(deploy) != "7:1 Deployment web" {
		t.Fatalf("the Deployment starts at %s", where(deploy))
	}
	for path, want := range map[string]string{
		"spec.template.spec.containers[0].env[1].valueFrom.secretKeyRef": "22:13", // the key
		"spec.template.spec.containers[0]":                               "15:9",  // the item (its anchor)
		"spec.template.spec.containers[0].name":                          "16:9",
		"spec.template.spec.containers[1].env[1].valueFrom":              "21:11", // merged from *api
		"spec.template.spec.containers[1].name":                          "24:9",  // its own, not the merged one
		"spec.template.spec.volumes[0].configMap":                        "27:9",
		"spec.template.spec.containers[0].env[7].valueFrom":              "17:9", // no such item: env
		"spec.template.spec.containers[0].volumeMounts[0]":               "15:9", // left to its default: the container
		"spec.template.spec.volumes[data.d]":                             "25:7", // a key a list does not have
		"metadata.annotations":                                           "9:1",
		"spec.template.spec.containers[0":                                "14:7", // malformed tail dropped
		"":                                                               "7:1",
	} {
		line, column := deploy.position(path)
		if got := fmt.Sprintf("%d:%d", line, column); got != want {
			t.Errorf("%q at %s, want %s", path, got, want)
		}
	}

	// Without a YAML node (text go-yaml v3 does not read), the object's
	// start.
	deploy.node = nil
	if line, column := deploy.position("spec.template"); line != 7 || column != 1 {
		t.Errorf("without a node: %d:%d, want 7:1", line, column)
	}
}
