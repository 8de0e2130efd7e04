package framework

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// InProductCode returns the first group of every match of re in the
// product's Go sources (cmd and internal, tests left out): what the code
// declares, for tests that hold documentation and shipped files to it.
func InProductCode(re *regexp.Regexp) ([]string, error) {
	var found []string
	for _, dir := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(RepoRoot(), dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				found = append(found, m[1])
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// metricName is how configward declares a metric (prometheus.*Opts, or
// prometheus.NewDesc for a collector of its own).
var metricName = regexp.MustCompile(`(?:Name:\s+|prometheus\.NewDesc\(\s*)"(configward_[a-z_]+)"`)

// RegisteredMetrics are the names of the metrics configward declares.
func RegisteredMetrics() ([]string, error) { return InProductCode(metricName) }
