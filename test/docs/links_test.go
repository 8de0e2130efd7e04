package docs

import (
	"bytes"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/configward/configward/test/framework"
)

// The documentation is split into pages by reader (README.md, docs/, the
// chart's and the policies' READMEs) that link to each other's sections. A
// page renamed or a heading reworded breaks those links without any other
// test noticing, so every relative link and every anchor in every Markdown
// file the repository tracks is checked here: the file must exist, and an
// anchor must be the GitHub anchor of a heading of the file it points at.
// Links with a scheme (https:, mailto:) are not followed.
func TestMarkdownLinks(t *testing.T) {
	root := framework.RepoRoot()
	files := markdownFiles(t, root)
	if !slices.Contains(files, "README.md") || !slices.Contains(files, "CONTRIBUTING.md") {
		t.Fatalf("the Markdown files found (%v) do not include README.md and CONTRIBUTING.md", files)
	}
	parsed := map[string]*markdownDoc{} // by path relative to root
	parse := func(rel string) *markdownDoc {
		if d, ok := parsed[rel]; ok {
			return d
		}
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		d := parseMarkdown(string(text))
		parsed[rel] = d
		return d
	}
	checked := 0
	for _, file := range files {
		for _, l := range parse(file).links {
			if external.MatchString(l.target) {
				continue
			}
			checked++
			where := file + ":" + strconv.Itoa(l.line) + ": link " + l.target
			rawPath, frag, _ := strings.Cut(l.target, "#")
			p, err := url.PathUnescape(rawPath)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			target := file
			if p != "" {
				if strings.HasPrefix(p, "/") {
					target = strings.TrimPrefix(p, "/") // from the repository's root, as GitHub reads it
				} else {
					target = filepath.ToSlash(filepath.Join(filepath.Dir(file), p))
				}
				target = filepath.ToSlash(filepath.Clean(target))
				if target == ".." || strings.HasPrefix(target, "../") {
					t.Errorf("%s: points outside the repository", where)
					continue
				}
				info, err := os.Stat(filepath.Join(root, filepath.FromSlash(target)))
				if err != nil {
					t.Errorf("%s: %s does not exist", where, target)
					continue
				}
				if frag != "" && (info.IsDir() || !strings.EqualFold(filepath.Ext(target), ".md")) {
					t.Errorf("%s: an anchor can only be checked in a Markdown file, and %s is not one", where, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			anchor, err := url.PathUnescape(frag)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if !parse(target).anchors[anchor] {
				t.Errorf("%s: %s has no heading whose anchor is #%s", where, target, anchor)
			}
		}
	}
	t.Logf("checked %d relative links in %d files", checked, len(files))
	if checked < 50 {
		t.Errorf("checked only %d relative links in %d files; the parser no longer finds them", checked, len(files))
	}
}

// GitHub's anchors: the heading's text, lower-cased, with punctuation other
// than - and _ removed and each space turned into -; the second heading
// with the same anchor gets -1, the third -2.
func TestAnchorSlugs(t *testing.T) {
	text := strings.Join([]string{
		"# configward",
		"## `configward check` in a CI pipeline",
		"### From Helm's `checksum/config`",
		"### Sizing: caches and the admission path",
		"### Custom workload kinds (Argo Rollouts, OpenKruise)",
		"## Emergency: the webhook is down — and writes are refused ##",
		"## [Linked](other.md) heading_with_underscore",
		"```sh",
		"# not a heading",
		"```",
		"## Upgrading",
		"## Upgrading",
		"## Upgrading",
		"#not-a-heading",
		"See [x](#upgrading-1) and [y](docs/a.md#b \"title\") and `[z](code.md)` and ![img](../bench/p.png).",
		"[ref]: ../policies/README.md#input",
	}, "\n")
	d := parseMarkdown(text)
	for _, want := range []string{
		"configward", "configward-check-in-a-ci-pipeline", "from-helms-checksumconfig",
		"sizing-caches-and-the-admission-path", "custom-workload-kinds-argo-rollouts-openkruise",
		"emergency-the-webhook-is-down--and-writes-are-refused", "linked-heading_with_underscore",
		"upgrading", "upgrading-1", "upgrading-2",
	} {
		if !d.anchors[want] {
			t.Errorf("no anchor %q in %v", want, d.anchors)
		}
	}
	if d.anchors["not-a-heading"] || len(d.anchors) != 10 {
		t.Errorf("anchors %v", d.anchors)
	}
	var targets []string
	for _, l := range d.links {
		targets = append(targets, l.target)
	}
	if want := []string{"other.md", "#upgrading-1", "docs/a.md#b", "../bench/p.png", "../policies/README.md#input"}; !slices.Equal(targets, want) {
		t.Errorf("links %q, want %q", targets, want)
	}
}

// markdownFiles lists the Markdown files git tracks (and new ones it does
// not ignore, so a page is checked before its first commit), relative to
// root, leaving out bin/ and testdata. Without git (an exported tree), every
// Markdown file under root outside those and .git.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	skip := func(rel string) bool {
		parts := strings.Split(rel, "/")
		return parts[0] == "bin" || slices.Contains(parts, "testdata")
	}
	var files []string
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.md", "*.MD").Output()
	if err == nil {
		for _, f := range bytes.Split(out, []byte{0}) {
			if rel := string(f); rel != "" && !skip(rel) {
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err == nil { // not deleted in the work tree
					files = append(files, rel)
				}
			}
		}
		return files
	}
	t.Logf("git ls-files: %v; walking the tree instead", err)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (d.Name() == ".git" || skip(rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.EqualFold(filepath.Ext(rel), ".md") && !skip(rel) {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

type markdownLink struct {
	line   int
	target string
}

type markdownDoc struct {
	anchors map[string]bool
	links   []markdownLink
}

var (
	external  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`) // https:, mailto:, ...
	fence     = regexp.MustCompile("^ *(```+|~~~+)")
	heading   = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	refDef    = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?`)
	htmlID    = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	inlineRef = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag   = regexp.MustCompile(`<[^>]+>`)
)

// parseMarkdown finds the anchors of a Markdown file's ATX headings (and of
// <a name|id="..."> tags) and the targets of its inline links, images and
// link reference definitions, outside fenced code blocks and code spans.
func parseMarkdown(text string) *markdownDoc {
	d := &markdownDoc{anchors: map[string]bool{}}
	occurrences := map[string]int{}
	open := "" // the fence a code block was opened with
	for i, line := range strings.Split(text, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case open == "":
				open = m[1]
				continue
			case m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), m[1][:1])) == "":
				open = ""
				continue
			}
		}
		if open != "" {
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			// github-slugger: a slug already taken gets -1, -2, ... from
			// the count of the slug it was made from.
			base := slug(m[2])
			s := base
			for {
				if _, taken := occurrences[s]; !taken {
					break
				}
				occurrences[base]++
				s = base + "-" + strconv.Itoa(occurrences[base])
			}
			occurrences[s] = 0
			d.anchors[s] = true
		}
		line = withoutCodeSpans(line)
		if m := refDef.FindStringSubmatch(line); m != nil {
			d.links = append(d.links, markdownLink{i + 1, m[1]})
			continue
		}
		for rest := line; ; {
			at := strings.Index(rest, "](")
			if at < 0 {
				break
			}
			rest = rest[at+2:]
			if target := linkTarget(rest); target != "" {
				d.links = append(d.links, markdownLink{i + 1, target})
			}
		}
	}
	return d
}

// slug is GitHub's anchor for a heading's text: what the heading shows
// (link text, not its target; no tags), lower-cased, letters, digits, -
// and _ kept, each space turned into -, everything else dropped.
func slug(text string) string {
	text = inlineRef.ReplaceAllString(text, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// linkTarget reads a link destination from just after "](": <...>, or up
// to white space or the ")" that closes it (balanced parentheses inside).
func linkTarget(s string) string {
	s = strings.TrimLeft(s, " \t")
	if strings.HasPrefix(s, "<") {
		if end := strings.Index(s, ">"); end > 0 {
			return s[1:end]
		}
		return ""
	}
	depth := 0
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth == 0, r == ' ', r == '\t':
			return s[:i]
		case r == ')':
			depth--
		}
	}
	return ""
}

// withoutCodeSpans blanks `code spans` (of any number of backticks), whose
// brackets are not links.
func withoutCodeSpans(line string) string {
	var b strings.Builder
	for {
		start := strings.Index(line, "`")
		if start < 0 {
			b.WriteString(line)
			return b.String()
		}
		n := start
		for n < len(line) && line[n] == '`' {
			n++
		}
		ticks := line[start:n]
		end := -1
		for from := n; from < len(line); {
			j := strings.Index(line[from:], ticks)
			if j < 0 {
				break
			}
			j += from
			k := j + len(ticks)
			if k < len(line) && line[k] == '`' { // a longer run is not the closing one
				for k < len(line) && line[k] == '`' {
					k++
				}
				from = k
				continue
			}
			end = j
			break
		}
		if end < 0 { // unmatched: literal backticks
			b.WriteString(line[:n])
			line = line[n:]
			continue
		}
		b.WriteString(line[:start])
		b.WriteString("``")
		line = line[end+len(ticks):]
	}
}
