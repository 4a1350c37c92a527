package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// What the image is: the Dockerfile at the repository's root says the same
// (TestDockerfileAgrees holds them together).
const (
	UID       = 65532
	UserName  = "agentexec"
	Home      = "/home/agentexec"
	Workspace = "/workspace"
	BinDir    = "/usr/local/bin"
	ConfigDir = "/etc/agentexec"
	TokenFile = "/var/run/secrets/agentexec/token"
	Port      = 8765
)

// ImageConfig is the agentexec layer's configuration file, embedded.
//
//go:embed config.toml
var ImageConfig []byte

// Entrypoint and Cmd: serve on every address of the pod with the token
// from the mounted Secret.
var (
	Entrypoint = []string{"agentexec", "serve"}
	Cmd        = []string{"--listen", fmt.Sprintf("0.0.0.0:%d", Port), "--token-file", TokenFile}
	Env        = []string{
		"PATH=" + BinDir + ":/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + Home,
		"AGENTEXEC_CONFIG=" + ConfigDir + "/config.toml",
	}
)

// Media types of the OCI image specification.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// epoch is the modification time of every file of the layer and the
// image's creation time, so that the same binaries give the same digests.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Options say what to build.
type Options struct {
	Out     string // OCI layout directory
	Tarball string // optional tarball of the layout, with Docker's manifest.json
	Arch    string // GOARCH
	Tag     string // reference name
	Version string // version label
	// Binaries is a directory already holding agentexec and
	// agentexec-sandbox; empty means compile them.
	Binaries string
}

// Image is what Build wrote: digests are "sha256:...".
type Image struct {
	Manifest, Config, Layer, DiffID string
	LayerSize                       int64
}

// Descriptor points at a blob.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Platform is an image's OS and architecture.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// Index is an OCI image index (index.json).
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Config is the OCI image configuration.
type Config struct {
	Created      time.Time `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       struct {
		User         string              `json:"User"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Env          []string            `json:"Env"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		WorkingDir   string              `json:"WorkingDir"`
		Labels       map[string]string   `json:"Labels"`
		StopSignal   string              `json:"StopSignal"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []struct {
		Created   time.Time `json:"created"`
		CreatedBy string    `json:"created_by"`
	} `json:"history"`
}

// Build compiles the binaries (unless o.Binaries has them) and writes the
// image.
func Build(o Options) (Image, error) {
	if o.Arch == "" {
		return Image{}, errors.New("no architecture given")
	}
	bin := o.Binaries
	if bin == "" {
		dir, err := os.MkdirTemp("", "agentexec-image-")
		if err != nil {
			return Image{}, err
		}
		defer os.RemoveAll(dir)
		if err := compile(dir, o.Arch); err != nil {
			return Image{}, err
		}
		bin = dir
	}
	files, err := layerFiles(bin)
	if err != nil {
		return Image{}, err
	}
	return write(o, files)
}

// repoRoot finds the main module's directory above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/agentexec/agentexec\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the agentexec repository (go.mod of github.com/agentexec/agentexec) is not above the working directory")
		}
		dir = parent
	}
}

// compile builds static binaries of agentexec and agentexec-sandbox into
// dir.
func compile(dir, arch string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+string(filepath.Separator), "./cmd/agentexec", "./cmd/agentexec-sandbox")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// layerFile is one entry of the layer.
type layerFile struct {
	name string // without a leading slash
	mode int64  // permission bits (and sticky)
	uid  int
	dir  bool
	data []byte
}

// layerFiles lists the layer: the binaries from bin, passwd and group, the
// configuration, and the directories the user writes.
func layerFiles(bin string) ([]layerFile, error) {
	var files []layerFile
	dir := func(name string, mode int64, uid int) {
		files = append(files, layerFile{name: name, mode: mode, uid: uid, dir: true})
	}
	file := func(name string, mode int64, data []byte) {
		files = append(files, layerFile{name: name, mode: mode, data: data})
	}
	for _, d := range []string{"etc", ConfigDir, "usr", "usr/local", BinDir, "home", "var", "var/run", "var/run/secrets"} {
		dir(strings.TrimPrefix(d, "/"), 0o755, 0)
	}
	dir(strings.TrimPrefix(Home, "/"), 0o755, UID)
	dir(strings.TrimPrefix(Workspace, "/"), 0o755, UID)
	dir("tmp", 0o1777, 0)
	file("etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:agentexec:%s:/bin/bash\n", UserName, UID, UID, Home))
	file("etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", UserName, UID))
	file(strings.TrimPrefix(ConfigDir, "/")+"/config.toml", 0o644, ImageConfig)
	for _, name := range []string{"agentexec", "agentexec-sandbox"} {
		data, err := os.ReadFile(filepath.Join(bin, name))
		if err != nil {
			return nil, fmt.Errorf("binary: %w", err)
		}
		file(strings.TrimPrefix(BinDir, "/")+"/"+name, 0o755, data)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, nil
}

// writeLayer writes the layer as a gzipped tarball, returning its bytes
// and the digest of the uncompressed tarball (the diff id).
func writeLayer(files []layerFile) (gz []byte, diffID string, err error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: epoch, Format: tar.FormatPAX,
			Uname: map[bool]string{true: UserName, false: "root"}[f.uid == UID], Gname: map[bool]string{true: UserName, false: "root"}[f.uid == UID]}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return out.Bytes(), digest(raw.Bytes()), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// write writes the layout (and the tarball) for the layer files.
func write(o Options, files []layerFile) (Image, error) {
	layer, diffID, err := writeLayer(files)
	if err != nil {
		return Image{}, err
	}
	var c Config
	c.Created, c.Architecture, c.OS = epoch, o.Arch, "linux"
	c.Config.User = fmt.Sprintf("%d:%d", UID, UID)
	c.Config.ExposedPorts = map[string]struct{}{fmt.Sprintf("%d/tcp", Port): {}}
	c.Config.Env, c.Config.Entrypoint, c.Config.Cmd, c.Config.WorkingDir = Env, Entrypoint, Cmd, Workspace
	c.Config.StopSignal = "SIGTERM"
	c.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "agentexec",
		"org.opencontainers.image.description": "agentexec serve: run commands for AI agents over MCP (empty base; see the Dockerfile for the Debian one)",
		"org.opencontainers.image.source":      "https://github.com/agentexec/agentexec",
		"org.opencontainers.image.version":     o.Version,
	}
	c.RootFS.Type, c.RootFS.DiffIDs = "layers", []string{diffID}
	c.History = append(c.History, struct {
		Created   time.Time `json:"created"`
		CreatedBy string    `json:"created_by"`
	}{epoch, "deploy/image: agentexec and agentexec-sandbox (static), passwd and group for uid 65532, /etc/agentexec/config.toml"})
	config, err := json.Marshal(c)
	if err != nil {
		return Image{}, err
	}
	m := Manifest{SchemaVersion: 2, MediaType: mediaManifest,
		Config: Descriptor{MediaType: mediaConfig, Digest: digest(config), Size: int64(len(config))},
		Layers: []Descriptor{{MediaType: mediaLayer, Digest: digest(layer), Size: int64(len(layer))}}}
	manifest, err := json.Marshal(m)
	if err != nil {
		return Image{}, err
	}
	idx := Index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []Descriptor{{
		MediaType: mediaManifest, Digest: digest(manifest), Size: int64(len(manifest)),
		Annotations: map[string]string{"org.opencontainers.image.ref.name": o.Tag},
		Platform:    &Platform{Architecture: o.Arch, OS: "linux"},
	}}}
	index, err := json.Marshal(idx)
	if err != nil {
		return Image{}, err
	}
	// Docker's manifest.json, so that `docker load` takes the tarball.
	dockerManifest, err := json.Marshal([]map[string]any{{
		"Config": "blobs/sha256/" + strings.TrimPrefix(digest(config), "sha256:"), "RepoTags": []string{o.Tag},
		"Layers": []string{"blobs/sha256/" + strings.TrimPrefix(digest(layer), "sha256:")},
	}})
	if err != nil {
		return Image{}, err
	}
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/sha256/" + strings.TrimPrefix(digest(config), "sha256:"), config},
		{"blobs/sha256/" + strings.TrimPrefix(digest(manifest), "sha256:"), manifest},
		{"blobs/sha256/" + strings.TrimPrefix(digest(layer), "sha256:"), layer},
	}
	if ents, err := os.ReadDir(o.Out); err == nil && len(ents) > 0 {
		return Image{}, fmt.Errorf("%s exists and is not empty", o.Out)
	}
	for _, e := range entries {
		p := filepath.Join(o.Out, filepath.FromSlash(e.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return Image{}, err
		}
		if err := os.WriteFile(p, e.data, 0o644); err != nil {
			return Image{}, err
		}
	}
	if o.Tarball != "" {
		if err := writeTarball(o.Tarball, append(entries, struct {
			name string
			data []byte
		}{"manifest.json", dockerManifest})); err != nil {
			return Image{}, err
		}
	}
	return Image{Manifest: digest(manifest), Config: digest(config), Layer: digest(layer), DiffID: diffID, LayerSize: int64(len(layer))}, nil
}

// writeTarball writes the entries as an uncompressed tarball.
func writeTarball(path string, entries []struct {
	name string
	data []byte
}) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	dirs := map[string]bool{}
	for _, e := range entries {
		if d := filepath.ToSlash(filepath.Dir(e.name)); d != "." {
			for _, p := range []string{"blobs", d} {
				if !dirs[p] {
					dirs[p] = true
					if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o755, ModTime: epoch}); err != nil {
						f.Close()
						return err
					}
				}
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch}); err != nil {
			f.Close()
			return err
		}
		if _, err := io.Copy(tw, bytes.NewReader(e.data)); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
