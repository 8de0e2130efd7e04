package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/configward/configward/internal/reload"
)

// dataLink is the symlink through which the kubelet's atomic writer
// publishes a projected volume's content: it writes each new content into a
// new timestamped directory, then swaps ..data to it in one rename, so a
// reader that follows ..data always sees one whole content.
const dataLink = "..data"

// content is one config's content on disk: which swap of the kubelet
// (revision, the timestamped directory ..data names) and when it happened,
// and its values, which are only fingerprinted and then dropped.
type content struct {
	revision  string
	swappedAt time.Time
	values    map[string][]byte
}

// revisionOf is the directory ..data names in dir now, "" when there is
// none (not a kubelet-projected volume).
func revisionOf(dir string) string {
	target, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil {
		return ""
	}
	return target
}

// swapTime is when the kubelet swapped revision rev of dir in: the
// timestamped directory's last change, just before the swap.
func swapTime(dir, rev string) (time.Time, error) {
	info, err := os.Stat(filepath.Join(dir, rev))
	if err != nil {
		return time.Time{}, err
	}
	return info.ModTime(), nil
}

// maxValues bounds what one content may hold: a ConfigMap or Secret holds
// at most 1 MiB.
const maxValues = 4 << 20

// read reads the content ..data names in c's directory, whole: the files
// of one swap, each as the key it holds (c.Items, or its path).
func read(c reload.Config) (content, error) {
	rev := revisionOf(c.Dir)
	if rev == "" {
		return content{}, fmt.Errorf("%s has no %s: not a ConfigMap or Secret volume the kubelet projects", c.Dir, dataLink)
	}
	root := filepath.Join(c.Dir, rev)
	at, err := swapTime(c.Dir, rev)
	if err != nil {
		return content{}, err
	}
	out := content{revision: rev, swappedAt: at, values: map[string][]byte{}}
	total := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if c.Items != nil {
			var ok bool
			if key, ok = c.Items[key]; !ok {
				return nil
			}
		}
		v, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if total += len(v); total > maxValues {
			return fmt.Errorf("%s holds more than %d bytes", c.Dir, maxValues)
		}
		out.values[key] = v
		return nil
	})
	if err != nil {
		return content{}, fmt.Errorf("reading %s: %w", c.Dir, err)
	}
	if rev != revisionOf(c.Dir) {
		// Swapped while it was read: the next swap event reads it again.
		return content{}, errSwapped
	}
	return out, nil
}

var errSwapped = fmt.Errorf("swapped while read")

// sum tells one content from another, within the agent: a SHA-256 of its
// keys and values in key order. It never leaves the agent (what leaves is
// keyed: reload.Fingerprints).
func (c content) sum() string {
	keys := slices.Sorted(maps.Keys(c.values))
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(c.values[k]))
		h.Write(c.values[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}
