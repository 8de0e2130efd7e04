package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configward/configward/test/framework"
)

// CONTRIBUTING's layout names every package under internal/, and each
// says what it is for in its package comment: a package
// nobody can find in it is one whose job a newcomer has to guess, and the
// place a second copy of a decision starts. A package nested in another
// (internal/controller/rollouts) is named inside its parent's entry.
func TestLayoutNamesEveryPackage(t *testing.T) {
	root := framework.RepoRoot()
	text, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	layout := string(text)
	entry := func(pkg string) string {
		start := strings.Index(layout, "- **`"+pkg+"`**")
		if start < 0 {
			return ""
		}
		end := strings.Index(layout[start+1:], "\n- ")
		if end < 0 {
			return layout[start:]
		}
		return layout[start : start+1+end]
	}
	found := 0
	err = filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || !hasGoCode(t, path) {
			return err
		}
		found++
		rel, _ := filepath.Rel(root, path)
		if !hasPackageComment(t, path) {
			t.Errorf("%s has no package comment (// Package %s ...): say what it is for", rel, filepath.Base(path))
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		top := strings.Join(parts[:2], "/")
		switch {
		case top == "internal/api":
			// The API's one package, named with its version.
			if entry("internal/api/v1alpha1") == "" {
				t.Errorf("CONTRIBUTING.md's layout has no entry for internal/api/v1alpha1")
			}
		case len(parts) == 2:
			if entry(top) == "" {
				t.Errorf("CONTRIBUTING.md's layout has no entry for %s", top)
			}
		case !strings.Contains(entry(top), "`"+parts[len(parts)-1]+"`"):
			t.Errorf("CONTRIBUTING.md's entry for %s does not name %s", top, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 20 {
		t.Fatalf("found only %d packages under internal/: the walk no longer sees them", found)
	}
}

// hasGoCode says whether dir holds a Go file other than a test's.
func hasGoCode(t *testing.T, dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), "_test.go") {
			return true
		}
	}
	return false
}

// hasPackageComment says whether a Go file of dir opens with the package's
// comment.
func hasPackageComment(t *testing.T, dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(text), "// Package "+filepath.Base(dir)+" ") {
			return true
		}
	}
	return false
}
