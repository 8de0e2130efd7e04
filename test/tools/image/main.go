// Command image assembles configward's multi-arch container image without a
// Docker engine: `make image` cross-compiles configward for each platform and
// runs this program, which writes an OCI image layout (a directory) and the
// same layout as one tarball.
//
// The image is built from scratch: no base image, one layer holding the
// static binary at /configward, run as 65532:65532. Nothing else is needed:
//   - configward talks TLS only to the API server, and verifies it with the
//     in-cluster CA from the service account mount
//     (/var/run/secrets/kubernetes.io/serviceaccount/ca.crt), so the image
//     carries no system CA bundle;
//   - the webhook serves the certificate mounted from its Secret;
//   - time zones for Rego's time builtins are compiled in (OPA imports
//     time/tzdata);
//   - the user is numeric, so no /etc/passwd is needed, and nothing is
//     written to the (read-only) root filesystem.
//
// The tarball is accepted by
//   - `ctr images import` and `kind load image-archive` (containerd reads the
//     OCI layout and names the image from the io.containerd.image.name
//     annotation on the single entry of index.json);
//   - `docker load` with the containerd image store (the same importer) and
//     with the classic store, which reads manifest.json instead: the archive
//     carries one, like `docker save` does since Docker 25, listing every
//     platform with the builder's own last so that, when both are loaded,
//     the tag ends on the image this machine runs (`docker load --platform`
//     picks one explicitly);
//   - `skopeo copy --all oci-archive:FILE docker://REF`.
//
// `crane push` reads a tarball as a `docker save` archive of one image only
// (it refuses this one, which lists two), so push the layout directory
// instead: `crane push DIR REF` pushes the multi-arch index.
//
// Every timestamp (config, history, tar headers) is the -created time, the
// commit time by default in the Makefile, so the same binaries always give
// the same digests.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Source and License are fixed facts about the project.
	Source  = "https://github.com/configward/configward"
	License = "Apache-2.0"
	// User is distroless' "nonroot"; the chart's securityContext runs as the
	// same uid and gid.
	User = "65532:65532"
	// Binary is where configward lives in the image (-path moves it, for
	// the test images of the node suite).
	Binary = "/configward"

	// containerd's and Docker's name for an image in an OCI layout: the full
	// reference, where org.opencontainers.image.ref.name holds the tag only.
	annotationImageName = "io.containerd.image.name"
)

// platformBinaries collects repeated -bin os/arch[/variant]=PATH flags.
type platformBinaries []platformBinary

type platformBinary struct {
	platform v1.Platform
	path     string
}

func (p *platformBinaries) String() string { return fmt.Sprint(*p) }

func (p *platformBinaries) Set(s string) error {
	plat, path, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return fmt.Errorf("want os/arch[/variant]=PATH, got %q", s)
	}
	parsed, err := v1.ParsePlatform(plat)
	if err != nil {
		return err
	}
	if parsed.OS == "" || parsed.Architecture == "" {
		return fmt.Errorf("want os/arch[/variant]=PATH, got %q", s)
	}
	// Docker and the official images call 64-bit ARM linux/arm64/v8;
	// containerd normalises arm64 and arm64/v8 to the same platform.
	if parsed.Architecture == "arm64" && parsed.Variant == "" {
		parsed.Variant = "v8"
	}
	*p = append(*p, platformBinary{platform: *parsed, path: path})
	return nil
}

type options struct {
	image      string
	version    string
	revision   string
	created    time.Time
	out        string
	layoutDir  string
	dockerArch string
	binaries   platformBinaries
	// path is where the binary lives, title the image's title label.
	path, title string
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	var o options
	var created string
	flags := flag.NewFlagSet("image", flag.ContinueOnError)
	flags.Var(&o.binaries, "bin", "os/arch[/variant]=PATH of a static configward binary (repeat for each platform)")
	flags.StringVar(&o.image, "image", "ghcr.io/configward/configward:dev", "image reference (repository:tag) the archive names")
	flags.StringVar(&o.version, "version", "dev", "org.opencontainers.image.version")
	flags.StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision (the commit)")
	flags.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time in Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	flags.StringVar(&o.out, "out", "", "the tarball to write")
	flags.StringVar(&o.layoutDir, "layout", "", "also keep the OCI layout in this directory (replaced), for `crane push DIR REF`")
	flags.StringVar(&o.path, "path", Binary, "where the binary lives in the image (its entrypoint)")
	flags.StringVar(&o.title, "title", "configward", "org.opencontainers.image.title")
	flags.StringVar(&o.dockerArch, "docker-arch", runtime.GOARCH, "architecture listed last in manifest.json, which a classic-store `docker load` tags")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if o.out == "" || len(o.binaries) == 0 {
		return errors.New("-out and at least one -bin are required")
	}
	secs := int64(0)
	if created != "" {
		var err error
		if secs, err = strconv.ParseInt(created, 10, 64); err != nil {
			return fmt.Errorf("-created: %w", err)
		}
	}
	o.created = time.Unix(secs, 0).UTC()

	digest, err := build(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s (index %s)\n", o.out, o.image, digest)
	return nil
}

// build writes the layout and the tarball and returns the digest of the
// multi-arch index, the digest a registry will serve for the tag.
func build(o options) (v1.Hash, error) {
	tag, err := name.NewTag(o.image, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("-image: %w", err)
	}
	fullName := normalizedName(tag)

	meta := map[string]string{
		"org.opencontainers.image.title":    o.title,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.licenses": License,
	}

	// One image per platform, compressed in parallel.
	images := make([]platformImage, len(o.binaries))
	errs := make([]error, len(o.binaries))
	var wg sync.WaitGroup
	for i, b := range o.binaries {
		wg.Go(func() {
			img, err := platformImageFor(b, o.path, o.created, meta)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", b.platform, err)
			}
			images[i] = platformImage{platform: b.platform, image: img}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return v1.Hash{}, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, pi := range images {
		p := pi.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        pi.image,
			Descriptor: v1.Descriptor{Platform: &p},
		})
	}
	idx = mutate.Annotations(idx, meta).(v1.ImageIndex)

	// index.json has a single entry, the multi-arch index, named the way
	// containerd and Docker (since 25) name what they save.
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add: idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			annotationImageName:                 fullName,
			"org.opencontainers.image.ref.name": tag.TagStr(),
		}},
	})

	dir := o.layoutDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "configward-image-"); err != nil {
			return v1.Hash{}, err
		}
		defer os.RemoveAll(dir)
	} else if err := removeLayout(dir); err != nil {
		return v1.Hash{}, err
	}
	if _, err := layout.Write(dir, top); err != nil {
		return v1.Hash{}, fmt.Errorf("writing the OCI layout: %w", err)
	}
	manifest, err := dockerManifest(images, fullName, o.dockerArch)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), manifest, 0o644); err != nil {
		return v1.Hash{}, err
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return v1.Hash{}, err
	}
	if err := writeTar(dir, o.out, o.created); err != nil {
		return v1.Hash{}, fmt.Errorf("writing %s: %w", o.out, err)
	}
	return idx.Digest()
}

// removeLayout deletes a previous layout at dir, and refuses to delete a
// directory that is not one.
func removeLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); len(entries) > 0 && err != nil {
		return fmt.Errorf("-layout %s: not an OCI layout, not replacing it", dir)
	}
	return os.RemoveAll(dir)
}

type platformImage struct {
	platform v1.Platform
	image    v1.Image
}

// platformImageFor is one platform's image: scratch plus the binary.
func platformImageFor(b platformBinary, path string, created time.Time, meta map[string]string) (v1.Image, error) {
	bin, err := os.ReadFile(b.path)
	if err != nil {
		return nil, err
	}
	layerGz, err := binaryLayer(bin, path, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerGz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}

	labels := make(map[string]string, len(meta))
	for k, v := range meta {
		labels[k] = v
	}
	cfg := &v1.ConfigFile{
		Created:      v1.Time{Time: created},
		OS:           b.platform.OS,
		Architecture: b.platform.Architecture,
		Variant:      b.platform.Variant,
		Config: v1.Config{
			Entrypoint: []string{path},
			User:       User,
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "COPY " + filepath.Base(b.path) + " " + path,
			Comment:   "make image (test/tools/image)",
		},
	})
	if err != nil {
		return nil, err
	}
	return plainImage{mutate.Annotations(img, meta).(v1.Image)}, nil
}

// plainImage keeps go-containerregistry from writing an artifactType (the
// config's media type) into the index's descriptor of each image. It is
// optional for images, docker and buildx leave it out, and tools that do not
// know it (skopeo 1.9) rewrite the index without it, changing its digest.
type plainImage struct{ v1.Image }

func (plainImage) ArtifactType() (string, error) { return "", nil }

// binaryLayer is a gzipped tar holding only the binary, root-owned and
// executable by everyone. Compressing here, once, keeps go-containerregistry
// from compressing again for each digest and write.
func binaryLayer(bin []byte, path string, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(path, "/"),
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  created,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// dockerManifest is the manifest.json of a `docker save` archive, for the
// classic image store's `docker load`, which does not read index.json.
func dockerManifest(images []platformImage, fullName, lastArch string) ([]byte, error) {
	type entry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	ordered := slices.Clone(images)
	slices.SortStableFunc(ordered, func(a, b platformImage) int {
		al, bl := a.platform.Architecture == lastArch, b.platform.Architecture == lastArch
		switch {
		case al == bl:
			return 0
		case al:
			return 1
		default:
			return -1
		}
	})
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	var entries []entry
	for _, pi := range ordered {
		m, err := pi.image.Manifest()
		if err != nil {
			return nil, err
		}
		e := entry{Config: blob(m.Config.Digest), RepoTags: []string{fullName}}
		for _, l := range m.Layers {
			e.Layers = append(e.Layers, blob(l.Digest))
		}
		entries = append(entries, e)
	}
	return json.Marshal(entries)
}

// normalizedName is the reference as containerd and Docker spell it:
// Docker Hub is docker.io, not go-containerregistry's index.docker.io.
func normalizedName(tag name.Tag) string {
	registry := tag.RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	return registry + "/" + tag.RepositoryStr() + ":" + tag.TagStr()
}

// writeTar archives the layout directory deterministically: sorted entries,
// fixed owner, modes and times.
func writeTar(dir, out string, created time.Time) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(paths)

	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{
			Name:    filepath.ToSlash(rel),
			ModTime: created,
		}
		switch {
		case info.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		case info.Mode().IsRegular():
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
		default:
			return fmt.Errorf("%s: unexpected file type %s", p, info.Mode().Type())
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
