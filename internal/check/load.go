// Package check runs configward's admission rules offline, on manifests, so a
// CI pipeline gets the same answers before anything reaches the cluster.
package check

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/configward/configward/internal/scheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Object is one manifest and where it was found.
type Object struct {
	File string
	Line int // line of the document's first line
	Obj  client.Object
}

// InputError is unusable input: exit code 2.
type InputError struct{ Err error }

func (e InputError) Error() string { return e.Err.Error() }
func (e InputError) Unwrap() error { return e.Err }

// Load reads every manifest in paths: files, directories (*.yaml, *.yml,
// *.json, recursively) and "-" for stdin. Kinds configward does not know are
// skipped; a document that is not a Kubernetes object is an InputError.
func Load(paths []string, stdin io.Reader) ([]Object, error) {
	decoder := serializer.NewCodecFactory(scheme.Scheme()).UniversalDeserializer()
	var out []Object
	for _, p := range paths {
		if p == "-" {
			raw, err := io.ReadAll(stdin)
			if err != nil {
				return nil, InputError{fmt.Errorf("reading stdin: %w", err)}
			}
			objs, err := decodeFile("<stdin>", raw, decoder)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
			continue
		}
		files, err := manifestFiles(p)
		if err != nil {
			return nil, InputError{err}
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, InputError{err}
			}
			objs, err := decodeFile(f, raw, decoder)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}

func manifestFiles(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// decodeFile splits a multi-document YAML (or JSON) file, keeping the line
// each document starts on.
func decodeFile(name string, raw []byte, decoder runtime.Decoder) ([]Object, error) {
	var out []Object
	for _, doc := range splitDocuments(raw) {
		if len(bytes.TrimSpace(stripComments(doc.text))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(doc.text)
		if err != nil {
			return nil, InputError{fmt.Errorf("%s:%d: not valid YAML or JSON: %w", name, doc.line, err)}
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		obj, gvk, err := decoder.Decode(js, nil, nil)
		if err != nil {
			if runtime.IsNotRegisteredError(err) {
				continue // a kind configward has no rules for
			}
			return nil, InputError{fmt.Errorf("%s:%d: not a Kubernetes object configward can read: %w", name, doc.line, err)}
		}
		co, ok := obj.(client.Object)
		if !ok {
			return nil, InputError{fmt.Errorf("%s:%d: %s is not an object", name, doc.line, gvk)}
		}
		out = append(out, Object{File: name, Line: doc.line, Obj: co})
	}
	return out, nil
}

type document struct {
	text []byte
	line int
}

func splitDocuments(raw []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, n := 1, 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("---")) && len(bytes.TrimSpace(line[3:])) == 0 {
			docs = append(docs, document{append([]byte(nil), cur.Bytes()...), start})
			cur.Reset()
			start = n + 1
			continue
		}
		cur.Write(line)
		cur.WriteByte('\n')
	}
	docs = append(docs, document{cur.Bytes(), start})
	// Report the line of the first non-blank, non-comment line.
	for i := range docs {
		for _, l := range strings.Split(string(docs[i].text), "\n") {
			t := strings.TrimSpace(l)
			if t != "" && !strings.HasPrefix(t, "#") {
				break
			}
			docs[i].line++
		}
	}
	return docs
}

func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out.Write(l)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}
