package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configward/configward/test/framework"
)

// The hot-reload page's tested recipes are the ones the node suite
// applies: the same annotations and the same flags, word for word.
func TestRecipesAreTheSuites(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs/apps/hot-reload.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(text)
	for _, r := range framework.Recipes {
		quoted := make([]string, len(r.Args))
		for i, a := range r.Args {
			quoted[i] = fmt.Sprintf("%q", a)
		}
		for _, want := range []string{
			fmt.Sprintf("configward.dev/reload-agent: %q", r.Trigger),
			fmt.Sprintf("configward.dev/reload-check: %q", r.Check),
			"args: [" + strings.Join(quoted, ", ") + "]",
		} {
			if !strings.Contains(page, want) {
				t.Errorf("the %s recipe of docs/apps/hot-reload.md lacks %s, which the node suite applies", r.Program, want)
			}
		}
	}
}
