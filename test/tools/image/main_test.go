package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// The platforms `make image` builds, as the index lists them.
var wantPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64", Variant: "v8"},
}

const testImage = "ghcr.io/configward/configward:0.0.0-imagetest"

// binaries returns configward built for each platform, and the version and
// commit stamped into it. `make test-image` passes the binaries `make image`
// uses (CONFIGWARD_IMAGE_BINARIES=bin/image, holding OS/ARCH/configward);
// otherwise the test cross-compiles them from this repository, the way the
// Makefile does.
func binaries(t *testing.T) (bins map[string]string, version, revision string) {
	t.Helper()
	bins = map[string]string{}
	if dir := os.Getenv("CONFIGWARD_IMAGE_BINARIES"); dir != "" {
		version = os.Getenv("CONFIGWARD_IMAGE_VERSION")
		if version == "" {
			t.Fatal("CONFIGWARD_IMAGE_BINARIES is set without CONFIGWARD_IMAGE_VERSION")
		}
		for _, p := range wantPlatforms {
			bins[p.OS+"/"+p.Architecture] = filepath.Join(dir, p.OS, p.Architecture, "configward")
		}
		return bins, version, os.Getenv("CONFIGWARD_IMAGE_REVISION")
	}

	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if gomod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil ||
		!bytes.HasPrefix(gomod, []byte("module github.com/configward/configward\n")) {
		t.Fatalf("%s is not configward's repository root (%v)", root, err)
	}
	version, revision = "v0.0.0-imagetest", "0123456789abcdef0123456789abcdef01234567"
	out := t.TempDir()
	for _, p := range wantPlatforms {
		bin := filepath.Join(out, p.OS, p.Architecture, "configward")
		cmd := exec.Command("go", "build", "-trimpath",
			"-ldflags", "-s -w -X main.version="+version+" -X main.commit="+revision,
			"-o", bin, "./cmd/configward")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
		start := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building configward for %s/%s: %v\n%s", p.OS, p.Architecture, err, b)
		}
		t.Logf("built configward for %s/%s in %s", p.OS, p.Architecture, time.Since(start).Round(time.Millisecond))
		bins[p.OS+"/"+p.Architecture] = bin
	}
	return bins, version, revision
}

func buildArgs(bins map[string]string, out, layoutDir, version, revision string, created time.Time) []string {
	args := []string{
		"-image", testImage, "-version", version, "-revision", revision,
		"-created", strconv.FormatInt(created.Unix(), 10), "-out", out,
	}
	if layoutDir != "" {
		args = append(args, "-layout", layoutDir)
	}
	for _, p := range slices.Sorted(maps.Keys(bins)) {
		args = append(args, "-bin", p+"="+bins[p])
	}
	return args
}

// TestImage builds the image from real configward binaries and checks what a
// cluster will run: both platforms, the user, entrypoint and labels, a
// root-owned executable /configward identical to the binary that went in,
// and that the binary for this machine runs and reports its version.
func TestImage(t *testing.T) {
	bins, version, revision := binaries(t)
	created := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "configward-image.tar")
	start := time.Now()
	if err := run(buildArgs(bins, out, filepath.Join(tmp, "layout"), version, revision, created), io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Logf("assembled the image in %s", time.Since(start).Round(time.Millisecond))

	// What the tarball holds, opened as an OCI image layout.
	dir := untar(t, out)
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want 1 (the multi-arch index)", len(topManifest.Manifests))
	}
	entry := topManifest.Manifests[0]
	if entry.MediaType != types.OCIImageIndex {
		t.Errorf("index.json entry is a %s, want an OCI image index", entry.MediaType)
	}
	for k, want := range map[string]string{
		"io.containerd.image.name":          testImage,
		"org.opencontainers.image.ref.name": "0.0.0-imagetest",
	} {
		if got := entry.Annotations[k]; got != want {
			t.Errorf("index.json annotation %s = %q, want %q", k, got, want)
		}
	}

	idx, err := top.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatal(err)
	}
	// Digests, sizes, diff IDs, and each config's platform against its
	// descriptor in the index.
	if err := validate.Index(idx); err != nil {
		t.Fatalf("invalid image index: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	checkMeta(t, "index annotation", im.Annotations, version, revision)

	var gotPlatforms []v1.Platform
	for _, desc := range im.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		if desc.ArtifactType != "" {
			t.Errorf("manifest %s has artifactType %q; docker and buildx write none for images", desc.Digest, desc.ArtifactType)
		}
		p := *desc.Platform
		gotPlatforms = append(gotPlatforms, p)
		t.Run(p.String(), func(t *testing.T) {
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, img, p, bins[p.OS+"/"+p.Architecture], version, revision, created)
		})
	}
	if !slices.EqualFunc(gotPlatforms, wantPlatforms, func(a, b v1.Platform) bool { return a.Equals(b) }) {
		t.Errorf("platforms %v, want %v", gotPlatforms, wantPlatforms)
	}

	checkDockerManifest(t, dir, out)
}

func checkImage(t *testing.T, img v1.Image, p v1.Platform, bin, version, revision string, created time.Time) {
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	if mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	checkMeta(t, "manifest annotation", m.Annotations, version, revision)

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture || cf.Variant != p.Variant {
		t.Errorf("config platform %s/%s/%s, want %s", cf.OS, cf.Architecture, cf.Variant, p)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532", cf.Config.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/configward"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("Entrypoint %q Cmd %q, want [/configward] and no Cmd", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.Config.WorkingDir != "/" {
		t.Errorf("WorkingDir %q, want /", cf.Config.WorkingDir)
	}
	checkMeta(t, "label", cf.Config.Labels, version, revision)
	if !cf.Created.Time.Equal(created) {
		t.Errorf("created %s, want %s", cf.Created.Time, created)
	}
	for _, h := range cf.History {
		if !h.Created.Time.Equal(created) {
			t.Errorf("history %q created %s, want %s", h.CreatedBy, h.Created.Time, created)
		}
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	files := layerFiles(t, layers[0])
	if len(files) != 1 {
		var names []string
		for _, f := range files {
			names = append(names, f.hdr.Name)
		}
		t.Errorf("layer holds %q, want only configward", names)
	}
	f, ok := files["configward"]
	if !ok {
		t.Fatal("layer has no /configward")
	}
	if f.hdr.Typeflag != tar.TypeReg || f.hdr.Mode&0o111 != 0o111 || f.hdr.Mode&0o022 != 0 {
		t.Errorf("/configward: type %c mode %o, want a regular file executable by all (uid 65532 is not its owner) and writable by root only", f.hdr.Typeflag, f.hdr.Mode)
	}
	if f.hdr.Uid != 0 || f.hdr.Gid != 0 {
		t.Errorf("/configward owned by %d:%d, want 0:0", f.hdr.Uid, f.hdr.Gid)
	}
	if !f.hdr.ModTime.Equal(created) {
		t.Errorf("/configward mtime %s, want %s", f.hdr.ModTime, created)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(f.data) != sha256.Sum256(want) {
		t.Errorf("/configward differs from %s", bin)
	}

	if p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
		return
	}
	// The binary out of the image runs here.
	exe := filepath.Join(t.TempDir(), "configward")
	if err := os.WriteFile(exe, f.data, os.FileMode(f.hdr.Mode)&os.ModePerm); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(exe, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("configward version: %v\n%s", err, got)
	}
	if !strings.Contains(string(got), "configward "+version+" ") || (revision != "" && !strings.Contains(string(got), revision)) {
		t.Errorf("configward version printed %q, want version %s and commit %s", got, version, revision)
	}
	t.Logf("%s", bytes.TrimSpace(got))
}

func checkMeta(t *testing.T, what string, got map[string]string, version, revision string) {
	t.Helper()
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.source":   "https://github.com/configward/configward",
		"org.opencontainers.image.title":    "configward",
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s %s = %q, want %q", what, k, v, want)
		}
	}
}

// checkDockerManifest checks manifest.json, which a classic-store `docker
// load` reads: every platform, tagged, this machine's last; and that a
// docker-save reader asked for "the" image refuses rather than picking one
// platform (what `crane push FILE` would otherwise push).
func checkDockerManifest(t *testing.T, dir, out string) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(wantPlatforms) {
		t.Fatalf("manifest.json lists %d images, want %d", len(entries), len(wantPlatforms))
	}
	var last v1.ConfigFile
	for _, e := range entries {
		if !slices.Equal(e.RepoTags, []string{testImage}) {
			t.Errorf("manifest.json RepoTags %q, want [%s]", e.RepoTags, testImage)
		}
		for _, f := range append([]string{e.Config}, e.Layers...) {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("manifest.json: %v", err)
			}
		}
		cb, err := os.ReadFile(filepath.Join(dir, e.Config))
		if err != nil {
			t.Fatal(err)
		}
		last = v1.ConfigFile{}
		if err := json.Unmarshal(cb, &last); err != nil {
			t.Fatal(err)
		}
	}
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		if last.Architecture != runtime.GOARCH {
			t.Errorf("manifest.json lists %s last, want this machine's %s", last.Architecture, runtime.GOARCH)
		}
	}
	if _, err := tarball.ImageFromPath(out, nil); err == nil {
		t.Error("the tarball reads as a single docker-save image; `crane push FILE` would push one platform")
	}
}

type layerFile struct {
	hdr  *tar.Header
	data []byte
}

func layerFiles(t *testing.T, l v1.Layer) map[string]layerFile {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(hdr.Name, "/")] = layerFile{hdr: hdr, data: data}
	}
}

// untar extracts the image tarball into a new directory.
func untar(t *testing.T, file string) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(hdr.Name) {
			t.Fatalf("tarball entry %q escapes the layout", hdr.Name)
		}
		p := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("tarball entry %q has type %c", hdr.Name, hdr.Typeflag)
		}
	}
}

// TestReproducible builds twice from the same (small, fake) binaries and
// compares the tarballs byte for byte; a different time changes the digests.
func TestReproducible(t *testing.T) {
	tmp := t.TempDir()
	bins := map[string]string{}
	for _, p := range wantPlatforms {
		bin := filepath.Join(tmp, p.Architecture)
		if err := os.WriteFile(bin, []byte("not really configward for "+p.Architecture), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[p.OS+"/"+p.Architecture] = bin
	}
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	build := func(name string, created time.Time) []byte {
		out := filepath.Join(tmp, name)
		if err := run(buildArgs(bins, out, "", "v1.2.3", "abc", created), io.Discard); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := build("a.tar", created), build("b.tar", created)
	if !bytes.Equal(a, b) {
		t.Error("two builds of the same binaries differ")
	}
	if c := build("c.tar", created.Add(time.Second)); bytes.Equal(a, c) {
		t.Error("the creation time is not in the image")
	}
}
