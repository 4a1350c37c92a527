package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// built is the image every test reads: built once, with real binaries.
var built struct {
	dir, tarball string
	img          Image
	err          error
}

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "agentexec-image-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built.dir, built.tarball = filepath.Join(tmp, "layout"), filepath.Join(tmp, "image.tar")
	built.img, built.err = Build(Options{Out: built.dir, Tarball: built.tarball, Arch: runtime.GOARCH, Tag: "agentexec:test", Version: "test"})
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

func image(t *testing.T) Image {
	t.Helper()
	if built.err != nil {
		t.Fatalf("build: %v", built.err)
	}
	return built.img
}

// blob reads a blob of the layout and checks its digest and size.
func blob(t *testing.T, d Descriptor) []byte {
	t.Helper()
	hexd, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok || len(hexd) != 64 {
		t.Fatalf("digest %q", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(built.dir, "blobs", "sha256", hexd))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexd || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: sha256 %x, size %d (descriptor says %d)", d.Digest, sum, len(b), d.Size)
	}
	return b
}

// strictJSON decodes b into v, refusing fields v does not have.
func strictJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

// readImage follows the layout from index.json to the config and layers.
func readImage(t *testing.T) (Manifest, Config, []byte) {
	t.Helper()
	image(t)
	layout, err := os.ReadFile(filepath.Join(built.dir, "oci-layout"))
	if err != nil || string(layout) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout: %q %v", layout, err)
	}
	b, err := os.ReadFile(filepath.Join(built.dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx Index
	strictJSON(t, b, &idx)
	if idx.SchemaVersion != 2 || idx.MediaType != mediaIndex || len(idx.Manifests) != 1 {
		t.Fatalf("index %+v", idx)
	}
	md := idx.Manifests[0]
	if md.MediaType != mediaManifest || md.Platform == nil || md.Platform.OS != "linux" || md.Platform.Architecture != runtime.GOARCH ||
		md.Annotations["org.opencontainers.image.ref.name"] != "agentexec:test" {
		t.Fatalf("index entry %+v", md)
	}
	var m Manifest
	strictJSON(t, blob(t, md), &m)
	if m.SchemaVersion != 2 || m.MediaType != mediaManifest || m.Config.MediaType != mediaConfig || len(m.Layers) != 1 || m.Layers[0].MediaType != mediaLayer {
		t.Fatalf("manifest %+v", m)
	}
	var c Config
	strictJSON(t, blob(t, m.Config), &c)
	gz := blob(t, m.Layers[0])
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.RootFS.DiffIDs) != 1 || c.RootFS.DiffIDs[0] != digest(raw) {
		t.Fatalf("diff ids %q, the layer's uncompressed digest is %s", c.RootFS.DiffIDs, digest(raw))
	}
	return m, c, raw
}

// TestImageConfig: the user, the entrypoint, the port, the environment.
func TestImageConfig(t *testing.T) {
	_, c, _ := readImage(t)
	if c.OS != "linux" || c.Architecture != runtime.GOARCH || c.RootFS.Type != "layers" {
		t.Errorf("platform %s/%s, rootfs %q", c.OS, c.Architecture, c.RootFS.Type)
	}
	if c.Config.User != "65532:65532" {
		t.Errorf("user %q: want the fixed non-root 65532:65532", c.Config.User)
	}
	if !reflect.DeepEqual(c.Config.Entrypoint, []string{"agentexec", "serve"}) {
		t.Errorf("entrypoint %q", c.Config.Entrypoint)
	}
	if !reflect.DeepEqual(c.Config.Cmd, []string{"--listen", "0.0.0.0:8765", "--token-file", "/var/run/secrets/agentexec/token"}) {
		t.Errorf("cmd %q: want serve on every address with the token from the mounted file", c.Config.Cmd)
	}
	if !reflect.DeepEqual(c.Config.ExposedPorts, map[string]struct{}{"8765/tcp": {}}) {
		t.Errorf("exposed ports %v", c.Config.ExposedPorts)
	}
	if c.Config.WorkingDir != "/workspace" || c.Config.StopSignal != "SIGTERM" {
		t.Errorf("working dir %q, stop signal %q", c.Config.WorkingDir, c.Config.StopSignal)
	}
	for _, want := range []string{"HOME=/home/agentexec", "AGENTEXEC_CONFIG=/etc/agentexec/config.toml"} {
		if !slices.Contains(c.Config.Env, want) {
			t.Errorf("env %q lacks %q", c.Config.Env, want)
		}
	}
	for _, kv := range c.Config.Env {
		if k, _, _ := strings.Cut(kv, "="); strings.Contains(strings.ToUpper(k), "TOKEN") || strings.Contains(strings.ToUpper(k), "SECRET") {
			t.Errorf("a secret in the image's environment: %q", kv)
		}
	}
}

// entry is one file of the layer.
type entry struct {
	hdr  *tar.Header
	data []byte
}

func layerEntries(t *testing.T, raw []byte) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if _, dup := out[name]; dup {
			t.Errorf("%s twice in the layer", name)
		}
		out[name] = entry{h, data}
	}
}

// TestImageLayer: exactly the files the image needs, owned and moded as
// they must be, with the user in passwd and group.
func TestImageLayer(t *testing.T) {
	_, _, raw := readImage(t)
	files := layerEntries(t, raw)
	var names []string
	for n, e := range files {
		names = append(names, n)
		if strings.HasPrefix(n, "/") || slices.Contains(strings.Split(n, "/"), "..") {
			t.Errorf("entry %q escapes the root", n)
		}
		if e.hdr.Mode&0o6000 != 0 {
			t.Errorf("%s is setuid or setgid (%o)", n, e.hdr.Mode)
		}
		if e.hdr.Typeflag != tar.TypeReg && e.hdr.Typeflag != tar.TypeDir {
			t.Errorf("%s: type %c (links and devices have no place here)", n, e.hdr.Typeflag)
		}
		if e.hdr.Typeflag == tar.TypeReg && e.hdr.Mode&0o022 != 0 {
			t.Errorf("%s is writable by group or others (%o)", n, e.hdr.Mode)
		}
		if e.hdr.Uid != 0 && n != "home/agentexec" && n != "workspace" {
			t.Errorf("%s is owned by %d: only the home and the workspace belong to the user", n, e.hdr.Uid)
		}
	}
	slices.Sort(names)
	want := []string{"etc", "etc/agentexec", "etc/agentexec/config.toml", "etc/group", "etc/passwd", "home", "home/agentexec", "tmp",
		"usr", "usr/local", "usr/local/bin", "usr/local/bin/agentexec", "usr/local/bin/agentexec-sandbox",
		"var", "var/run", "var/run/secrets", "workspace"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("layer holds %q\nwant %q", names, want)
	}
	for _, c := range []struct {
		name     string
		mode     int64
		uid, gid int
	}{
		{"usr/local/bin/agentexec", 0o755, 0, 0}, {"usr/local/bin/agentexec-sandbox", 0o755, 0, 0},
		{"home/agentexec", 0o755, 65532, 65532}, {"workspace", 0o755, 65532, 65532}, {"tmp", 0o1777, 0, 0},
		{"etc/passwd", 0o644, 0, 0}, {"etc/agentexec/config.toml", 0o644, 0, 0},
	} {
		h := files[c.name].hdr
		if h == nil || h.Mode != c.mode || h.Uid != c.uid || h.Gid != c.gid {
			t.Errorf("%s: %+v; want mode %o, %d:%d", c.name, h, c.mode, c.uid, c.gid)
		}
	}
	if !regexp.MustCompile(`(?m)^agentexec:x:65532:65532:[^:]*:/home/agentexec:/bin/bash$`).Match(files["etc/passwd"].data) {
		t.Errorf("passwd %q", files["etc/passwd"].data)
	}
	if !regexp.MustCompile(`(?m)^agentexec:x:65532:$`).Match(files["etc/group"].data) {
		t.Errorf("group %q", files["etc/group"].data)
	}
	if !bytes.Equal(files["etc/agentexec/config.toml"].data, ImageConfig) {
		t.Error("the configuration in the layer is not config.toml")
	}
}

// TestBinariesAreStatic: both binaries are ELF executables for the
// image's architecture without a program interpreter or a dynamic
// section, so they run on any base, the empty one included.
func TestBinariesAreStatic(t *testing.T) {
	_, c, raw := readImage(t)
	files := layerEntries(t, raw)
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "riscv64": elf.EM_RISCV, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390}[c.Architecture]
	for _, name := range []string{"usr/local/bin/agentexec", "usr/local/bin/agentexec-sandbox"} {
		for _, p := range notStatic(files[name].data, machine) {
			t.Errorf("%s: %s", name, p)
		}
		// -trimpath: no path of the build machine is left in the binary.
		if root, err := repoRoot(); err == nil && bytes.Contains(files[name].data, []byte(root+"/")) {
			t.Errorf("%s contains the build directory %s: built without -trimpath", name, root)
		}
	}
}

// notStatic lists why an ELF file is not a static executable for machine
// (any machine when 0).
func notStatic(data []byte, machine elf.Machine) []string {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	var problems []string
	if f.Type != elf.ET_EXEC {
		problems = append(problems, fmt.Sprintf("ELF type %v, want a static executable (ET_EXEC; PIE and dynamic executables are ET_DYN)", f.Type))
	}
	if machine != 0 && f.Machine != machine {
		problems = append(problems, fmt.Sprintf("machine %v, want %v", f.Machine, machine))
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			problems = append(problems, fmt.Sprintf("a %v program header", p.Type))
		}
	}
	for _, s := range []string{".interp", ".dynamic", ".dynsym"} {
		if f.Section(s) != nil {
			problems = append(problems, "a "+s+" section")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		problems = append(problems, fmt.Sprintf("imports %q", libs))
	}
	return problems
}

// TestNotStaticCatchesDynamic: the check refuses a dynamically linked
// program of this system.
func TestNotStaticCatchesDynamic(t *testing.T) {
	for _, p := range []string{"/bin/true", "/usr/bin/true", "/bin/sh"} {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		problems := notStatic(data, 0)
		if len(problems) == 0 {
			t.Skipf("%s is static here", p)
		}
		if !strings.Contains(strings.Join(problems, ";"), "PT_INTERP") {
			t.Errorf("%s: %q", p, problems)
		}
		return
	}
	t.Skip("no dynamically linked program found")
}

// extract unpacks the layer into a directory (as the current user).
func extract(t *testing.T, raw []byte) string {
	t.Helper()
	root := t.TempDir()
	for name, e := range layerEntries(t, raw) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if e.hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, e.data, os.FileMode(e.hdr.Mode)&0o777); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestBinariesRun: the binaries of the layer run, and the image's
// configuration loads and says what the image promises (best effort, the
// workspace volume).
func TestBinariesRun(t *testing.T) {
	_, c, raw := readImage(t)
	if c.Architecture != runtime.GOARCH || runtime.GOOS != "linux" {
		t.Skip("the image is not for this machine")
	}
	root := extract(t, raw)
	bin := filepath.Join(root, "usr/local/bin/agentexec")
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "agentexec ") {
		t.Fatalf("agentexec --version: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "config", "show")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "AGENTEXEC_CONFIG=" + filepath.Join(root, "etc/agentexec/config.toml")}
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("config show: %v\n%s", err, out)
	}
	// Each key from the image's file, with the file's line as its source.
	for _, key := range []string{`workspace = "/workspace"`, `profile = "workspace-write"`, `best_effort = true`} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `\s+# .*config\.toml:\d+$`).Match(out) {
			t.Errorf("config show does not take %s from the image's file:\n%s", key, out)
		}
	}
}

// TestLayerIsReproducible: the same files give the same digests.
func TestLayerIsReproducible(t *testing.T) {
	files := []layerFile{{name: "etc", mode: 0o755, dir: true}, {name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0::/:/x\n")}}
	a, da, err := writeLayer(files)
	if err != nil {
		t.Fatal(err)
	}
	b, db, _ := writeLayer(files)
	if !bytes.Equal(a, b) || da != db {
		t.Error("two layers of the same files differ")
	}
}

// TestTarball: the tarball holds the layout and Docker's manifest.json,
// whose paths lead to the same blobs.
func TestTarball(t *testing.T) {
	img := image(t)
	f, err := os.Open(built.tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	got := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = b
	}
	for _, name := range []string{"oci-layout", "index.json", "manifest.json"} {
		if _, ok := got[name]; !ok {
			t.Errorf("the tarball lacks %s", name)
		}
	}
	var dm []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	strictJSON(t, got["manifest.json"], &dm)
	if len(dm) != 1 || dm[0].Config != "blobs/sha256/"+strings.TrimPrefix(img.Config, "sha256:") || len(dm[0].Layers) != 1 ||
		dm[0].Layers[0] != "blobs/sha256/"+strings.TrimPrefix(img.Layer, "sha256:") || !slices.Equal(dm[0].RepoTags, []string{"agentexec:test"}) {
		t.Errorf("manifest.json %+v", dm)
	}
	for _, p := range append([]string{dm[0].Config}, dm[0].Layers...) {
		if b, ok := got[p]; !ok || digest(b) != "sha256:"+strings.TrimPrefix(p, "blobs/sha256/") {
			t.Errorf("%s is missing or its content has another digest", p)
		}
	}
}

// TestOtherTools: where skopeo and umoci are installed, they read the
// layout as an image and unpack it with the user's files in place.
func TestOtherTools(t *testing.T) {
	image(t)
	if p, err := exec.LookPath("skopeo"); err == nil {
		out, err := exec.Command(p, "inspect", "--config", "oci:"+built.dir+":agentexec:test").Output()
		if err != nil {
			t.Errorf("skopeo inspect: %v\n%s", err, out)
		} else if !bytes.Contains(out, []byte(`"User": "65532:65532"`)) {
			t.Errorf("skopeo sees %s", out)
		}
		if out, err := exec.Command(p, "inspect", "oci-archive:"+built.tarball).CombinedOutput(); err != nil {
			t.Errorf("skopeo inspect oci-archive: %v\n%s", err, out)
		}
	} else {
		t.Log("skopeo is not installed")
	}
	if p, err := exec.LookPath("umoci"); err == nil {
		dst := filepath.Join(t.TempDir(), "bundle")
		if out, err := exec.Command(p, "unpack", "--rootless", "--image", built.dir+":agentexec:test", dst).CombinedOutput(); err != nil {
			t.Errorf("umoci unpack: %v\n%s", err, out)
		} else if fi, err := os.Stat(filepath.Join(dst, "rootfs/usr/local/bin/agentexec")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("umoci's rootfs: %v %v", fi, err)
		}
	} else {
		t.Log("umoci is not installed")
	}
}

// TestDockerfileAgrees: the Dockerfile builds the image this program
// builds: static binaries with -trimpath, the same user, entrypoint,
// command, port, environment and configuration file.
func TestDockerfileAgrees(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines; drop comments.
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	instr := func(kw string) []string {
		var out []string
		for _, l := range lines {
			if k, rest, _ := strings.Cut(l, " "); strings.EqualFold(k, kw) {
				out = append(out, strings.TrimSpace(rest))
			}
		}
		return out
	}
	jsonArray := func(s string) []string {
		var v []string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Errorf("%q is not the exec (JSON) form: %v", s, err)
		}
		return v
	}
	froms := instr("FROM")
	if len(froms) < 2 || !strings.Contains(froms[0], "golang:") || !strings.Contains(froms[len(froms)-1], "debian:") {
		t.Errorf("stages %q: want a Go build stage and a Debian final stage", froms)
	}
	if u := instr("USER"); len(u) != 1 || u[0] != fmt.Sprintf("%d:%d", UID, UID) {
		t.Errorf("USER %q", u)
	}
	if e := instr("ENTRYPOINT"); len(e) != 1 || !slices.Equal(jsonArray(e[0]), Entrypoint) {
		t.Errorf("ENTRYPOINT %q, want %q", e, Entrypoint)
	}
	if c := instr("CMD"); len(c) != 1 || !slices.Equal(jsonArray(c[0]), Cmd) {
		t.Errorf("CMD %q, want %q", c, Cmd)
	}
	if p := instr("EXPOSE"); len(p) != 1 || p[0] != fmt.Sprint(Port) {
		t.Errorf("EXPOSE %q", p)
	}
	if w := instr("WORKDIR"); len(w) == 0 || w[len(w)-1] != Workspace {
		t.Errorf("WORKDIR %q", w)
	}
	run := strings.Join(instr("RUN"), "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/agentexec ./cmd/agentexec-sandbox", "--uid 65532", "--home-dir " + Home, "bash", "git", "ca-certificates"} {
		if !strings.Contains(run, want) {
			t.Errorf("the RUN steps lack %q", want)
		}
	}
	copies := strings.Join(instr("COPY"), "\n")
	for _, want := range []string{"/out/agentexec /out/agentexec-sandbox " + BinDir + "/", "deploy/image/config.toml " + ConfigDir + "/config.toml"} {
		if !strings.Contains(copies, want) {
			t.Errorf("the COPY steps lack %q", want)
		}
	}
	env := strings.Join(instr("ENV"), " ")
	for _, kv := range Env[1:] {
		if !strings.Contains(env, kv) {
			t.Errorf("ENV lacks %q", kv)
		}
	}
}
