// Command validate checks agentexec's Kubernetes manifests without a
// cluster: each document is decoded strictly into the Go types of the API it
// names (k8s.io/api for Deployments, Services and claims;
// sigs.k8s.io/agent-sandbox for Sandbox, SandboxTemplate, SandboxWarmPool
// and SandboxClaim), so that an unknown or misspelt field, a duplicate key,
// a wrong type or an unparsable quantity is an error, as the API server's
// strict field validation would make it; then semantic checks hold what the
// deployment promises: the pod non-root with every capability dropped, the
// RuntimeDefault seccomp profile, a read-only root file system with
// writable volumes where agentexec writes, the token from a Secret, probes
// on /livez and /readyz, resource requests and limits.
//
// Go types rather than vendored JSON schemas: the types are the source the
// CRDs and the OpenAPI schemas are generated from, they come with the
// modules at a pinned version, and they decode case-sensitively as the API
// server does. What only the CRD's markers say (enums, defaults) is checked
// here by hand.
//
//	cd deploy/kubernetes/validate && go run . ../agent-sandbox/*.yaml ../deployment/*.yaml
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	sandboxv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go run . FILE.yaml...")
		os.Exit(2)
	}
	var objs []Object
	failed := false
	for _, f := range os.Args[1:] {
		o, err := LoadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
		}
		objs = append(objs, o...)
	}
	for _, err := range Check(objs) {
		fmt.Fprintln(os.Stderr, err)
		failed = true
	}
	if failed {
		os.Exit(1)
	}
	fmt.Printf("%d objects valid\n", len(objs))
}

// Object is one decoded document.
type Object struct {
	File string // where it came from, and its index: "file#2"
	Kind string
	Name string
	Obj  any // *appsv1.Deployment, *corev1.Service, *extv1beta1.SandboxTemplate, ...
}

// kinds maps apiVersion/kind to a new object of the Go type it decodes to.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                                 func() any { return new(appsv1.Deployment) },
	"v1/Service":                                         func() any { return new(corev1.Service) },
	"v1/PersistentVolumeClaim":                           func() any { return new(corev1.PersistentVolumeClaim) },
	"networking.k8s.io/v1/NetworkPolicy":                 func() any { return new(networkingv1.NetworkPolicy) },
	"agents.x-k8s.io/v1beta1/Sandbox":                    func() any { return new(sandboxv1beta1.Sandbox) },
	"extensions.agents.x-k8s.io/v1beta1/SandboxTemplate": func() any { return new(extv1beta1.SandboxTemplate) },
	"extensions.agents.x-k8s.io/v1beta1/SandboxWarmPool": func() any { return new(extv1beta1.SandboxWarmPool) },
	"extensions.agents.x-k8s.io/v1beta1/SandboxClaim":    func() any { return new(extv1beta1.SandboxClaim) },
}

// LoadFile decodes every document of a YAML file.
func LoadFile(path string) ([]Object, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(filepath.Base(path), b)
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Load decodes the documents of a YAML stream strictly: a document of a
// kind this validator does not know, an unknown field, a duplicate key or a
// value of the wrong type is an error naming the document.
func Load(name string, data []byte) ([]Object, error) {
	var objs []Object
	var errs []error
	for i, doc := range docSeparator.Split(string(data), -1) {
		where := name
		if i > 0 {
			where = fmt.Sprintf("%s#%d", name, i+1)
		}
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		var tm metav1.TypeMeta
		if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		mk, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: apiVersion %q kind %q is not one the manifests use (want one of %s)", where, tm.APIVersion, tm.Kind, strings.Join(sortedKeys(kinds), ", ")))
			continue
		}
		obj := mk()
		strict, err := kjson.UnmarshalStrict(j, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", where, tm.Kind, err))
			continue
		}
		for _, e := range strict {
			errs = append(errs, fmt.Errorf("%s: %s: %w", where, tm.Kind, e))
		}
		objs = append(objs, Object{File: where, Kind: tm.Kind, Name: objectName(obj), Obj: obj})
	}
	return objs, errors.Join(errs...)
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func objectName(obj any) string {
	if o, ok := obj.(interface{ GetName() string }); ok {
		return o.GetName()
	}
	return ""
}

// The image's contract (deploy/image): where agentexec writes and reads.
const (
	containerName = "agentexec"
	tokenDir      = "/var/run/secrets/agentexec"
	homeDir       = "/home/agentexec"
	workspaceDir  = "/workspace"
	uid           = 65532
)

// Check runs the semantic checks over a set of objects (the manifests of
// one shape, or all of them): it returns every problem found.
func Check(objs []Object) []error {
	var errs []error
	fail := func(o Object, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s %s: %s", o.File, o.Kind, o.Name, fmt.Sprintf(format, args...)))
	}
	templates, pools := map[string]bool{}, map[string]bool{}
	type served struct {
		labels map[string]string
		ports  map[string]int32 // port names and numbers of the agentexec container
	}
	var servers []served
	for _, o := range objs {
		if msgs := validation.IsDNS1123Subdomain(o.Name); o.Name == "" || len(msgs) > 0 {
			fail(o, "metadata.name %q: %s", o.Name, strings.Join(msgs, "; "))
		}
		switch v := o.Obj.(type) {
		case *appsv1.Deployment:
			if v.Spec.Selector == nil || !labelsMatch(v.Spec.Selector.MatchLabels, v.Spec.Template.Labels) {
				fail(o, "spec.selector does not select the pod template's labels")
			}
			ports, ps := checkPod(&v.Spec.Template.Spec, nil)
			for _, p := range ps {
				fail(o, "%s", p)
			}
			servers = append(servers, served{v.Spec.Template.Labels, ports})
		case *sandboxv1beta1.Sandbox:
			_, ps := checkPod(&v.Spec.PodTemplate.Spec, claimNames(v.Spec.VolumeClaimTemplates))
			for _, p := range ps {
				fail(o, "%s", p)
			}
		case *extv1beta1.SandboxTemplate:
			templates[v.Name] = true
			_, ps := checkPod(&v.Spec.PodTemplate.Spec, claimNames(v.Spec.VolumeClaimTemplates))
			for _, p := range ps {
				fail(o, "%s", p)
			}
			// Enums of the CRD (kubebuilder markers the Go types do not
			// enforce).
			if m := v.Spec.NetworkPolicyManagement; m != "" && m != extv1beta1.NetworkPolicyManagementManaged && m != extv1beta1.NetworkPolicyManagementUnmanaged {
				fail(o, "spec.networkPolicyManagement %q: Managed or Unmanaged", m)
			}
			if p := v.Spec.EnvVarsInjectionPolicy; p != "" && p != extv1beta1.EnvVarsInjectionPolicyAllowed && p != extv1beta1.EnvVarsInjectionPolicyOverrides && p != extv1beta1.EnvVarsInjectionPolicyDisallowed {
				fail(o, "spec.envVarsInjectionPolicy %q: Allowed, Overrides or Disallowed", p)
			}
			if p := v.Spec.VolumeClaimTemplatesPolicy; p != "" && p != extv1beta1.VolumeClaimTemplatesPolicyAllowed && p != extv1beta1.VolumeClaimTemplatesPolicyOverrides && p != extv1beta1.VolumeClaimTemplatesPolicyDisallowed {
				fail(o, "spec.volumeClaimTemplatesPolicy %q: Allowed, Overrides or Disallowed", p)
			}
			if v.Spec.EnvVarsInjectionPolicy == extv1beta1.EnvVarsInjectionPolicyOverrides {
				fail(o, "spec.envVarsInjectionPolicy Overrides lets a claim replace agentexec's environment (AGENTEXEC_CONFIG, HOME): use Disallowed or Allowed")
			}
		case *extv1beta1.SandboxWarmPool:
			pools[v.Name] = true
		}
	}
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *extv1beta1.SandboxWarmPool:
			if !templates[v.Spec.TemplateRef.Name] {
				fail(o, "spec.sandboxTemplateRef.name %q names no SandboxTemplate of these manifests", v.Spec.TemplateRef.Name)
			}
			if v.Spec.Replicas != nil && *v.Spec.Replicas < 0 {
				fail(o, "spec.replicas is negative")
			}
		case *extv1beta1.SandboxClaim:
			if !pools[v.Spec.WarmPoolRef.Name] {
				fail(o, "spec.warmPoolRef.name %q names no SandboxWarmPool of these manifests", v.Spec.WarmPoolRef.Name)
			}
		case *networkingv1.NetworkPolicy:
			var target *served
			for i := range servers {
				if labelsMatch(v.Spec.PodSelector.MatchLabels, servers[i].labels) {
					target = &servers[i]
				}
			}
			if target == nil {
				fail(o, "spec.podSelector %v selects no agentexec pod of these manifests", v.Spec.PodSelector.MatchLabels)
				continue
			}
			if !slices.Contains(v.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				fail(o, "spec.policyTypes must hold Ingress")
			}
			for i, rule := range v.Spec.Ingress {
				if len(rule.From) == 0 {
					fail(o, "ingress[%d] admits every source: name the clients (from)", i)
				}
				for _, f := range rule.From {
					if f.IPBlock != nil && (f.IPBlock.CIDR == "0.0.0.0/0" || f.IPBlock.CIDR == "::/0") {
						fail(o, "ingress[%d] admits every address", i)
					}
				}
				if len(rule.Ports) == 0 {
					fail(o, "ingress[%d] opens every port: name agentexec's", i)
				}
				for _, p := range rule.Ports {
					if p.Port == nil {
						fail(o, "ingress[%d] opens every port: name agentexec's", i)
					} else if _, ok := resolvePort(*p.Port, target.ports); !ok {
						fail(o, "ingress[%d] port %s is not agentexec's", i, p.Port.String())
					}
				}
			}
		case *corev1.Service:
			var target *served
			for i := range servers {
				if len(v.Spec.Selector) > 0 && labelsMatch(v.Spec.Selector, servers[i].labels) {
					target = &servers[i]
				}
			}
			if target == nil {
				fail(o, "spec.selector %v selects no agentexec pod of these manifests", v.Spec.Selector)
				continue
			}
			if v.Spec.Type != "" && v.Spec.Type != corev1.ServiceTypeClusterIP {
				fail(o, "spec.type %s exposes agentexec beyond the cluster: use ClusterIP and put TLS in front of it", v.Spec.Type)
			}
			for _, p := range v.Spec.Ports {
				if _, ok := resolvePort(p.TargetPort, target.ports); !ok {
					fail(o, "port %q: targetPort %s is not agentexec's port", p.Name, p.TargetPort.String())
				}
			}
		}
	}
	return errs
}

func claimNames(t []sandboxv1beta1.PersistentVolumeClaimTemplate) []string {
	var out []string
	for _, c := range t {
		out = append(out, c.Name)
	}
	return out
}

func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// resolvePort finds a named or numbered port among ports.
func resolvePort(p intstr.IntOrString, ports map[string]int32) (int32, bool) {
	if p.Type == intstr.String {
		n, ok := ports[p.StrVal]
		return n, ok
	}
	for _, n := range ports {
		if n == p.IntVal {
			return n, true
		}
	}
	return 0, false
}

// flagValue returns the value of --name in args ("--name v" or
// "--name=v").
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// checkPod checks a pod spec holding agentexec; claims are the names of
// volume claim templates that its volume mounts may use. It returns the
// agentexec container's ports by name (and "" for the listen port).
func checkPod(spec *corev1.PodSpec, claims []string) (map[string]int32, []string) {
	var problems []string
	p := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		p("automountServiceAccountToken must be false: the agent's commands would read the service account's token")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		p("hostNetwork, hostPID and hostIPC must be off")
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		if _, dup := volumes[v.Name]; dup {
			p("volume %q is defined twice", v.Name)
		}
		volumes[v.Name] = v
		if v.HostPath != nil {
			p("volume %q is a hostPath: the agent's commands would reach the node's files", v.Name)
		}
	}
	var agentexec *corev1.Container
	names := map[string]bool{}
	all := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for i := range all {
		c := &all[i]
		if names[c.Name] {
			p("container %q is defined twice", c.Name)
		}
		names[c.Name] = true
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok && !slices.Contains(claims, m.Name) {
				p("container %q mounts %q, which is neither a volume nor a volume claim template", c.Name, m.Name)
			}
		}
		if c.Name == containerName {
			agentexec = c
		}
	}
	if agentexec == nil {
		p("no container named %q", containerName)
		return nil, problems
	}
	c := agentexec
	if slices.ContainsFunc(spec.InitContainers, func(ic corev1.Container) bool { return ic.Name == containerName }) &&
		(c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
		p("agentexec as an init container must be a native sidecar (restartPolicy: Always)")
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	// Non-root, by the container's setting or else the pod's.
	nonRoot, user := psc.RunAsNonRoot, psc.RunAsUser
	if sc.RunAsNonRoot != nil {
		nonRoot = sc.RunAsNonRoot
	}
	if sc.RunAsUser != nil {
		user = sc.RunAsUser
	}
	if nonRoot == nil || !*nonRoot {
		p("runAsNonRoot must be true")
	}
	if user == nil || *user == 0 {
		p("runAsUser must be set to a non-root uid (the image's is %d)", uid)
	}
	if sc.Privileged != nil && *sc.Privileged {
		p("agentexec must not be privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		p("allowPrivilegeEscalation must be false")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		p("capabilities.drop must hold ALL")
	} else if len(sc.Capabilities.Add) > 0 {
		p("capabilities.add must be empty, not %v", sc.Capabilities.Add)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		p("readOnlyRootFilesystem must be true")
	}
	seccomp := psc.SeccompProfile
	if sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		p("seccompProfile must be RuntimeDefault (on the pod or the container)")
	}

	// The token comes from a mounted Secret, never from a literal.
	args := append(slices.Clone(c.Command), c.Args...)
	for _, e := range c.Env {
		if e.Name == "AGENTEXEC_TOKEN" && e.Value != "" {
			p("AGENTEXEC_TOKEN is a literal in the manifest: mount it from a Secret (--token-file)")
		}
	}
	tokenFile, ok := flagValue(args, "--token-file")
	if !ok {
		p("no --token-file: the token must come from a mounted Secret")
	} else {
		mount := mountOf(c, tokenFile)
		switch {
		case mount == nil:
			p("--token-file %s is in no volume mount", tokenFile)
		case volumes[mount.Name].Secret == nil:
			p("--token-file %s is on volume %q, which is not a Secret", tokenFile, mount.Name)
		case !mount.ReadOnly:
			p("the token's volume %q must be mounted readOnly", mount.Name)
		default:
			if m := volumes[mount.Name].Secret.DefaultMode; m != nil && *m&0o007 != 0 {
				p("the token's Secret volume has mode %o: others may read it; use 0440 (owner root, group the fsGroup)", *m)
			}
			if m := volumes[mount.Name].Secret.DefaultMode; m != nil && *m&0o040 == 0 && *m&0o400 != 0 && (user == nil || *user != 0) {
				p("the token's Secret volume has mode %o: its files belong to root, so uid %d cannot read them; use 0440 with fsGroup %d", *m, uid, uid)
			}
			if psc.FSGroup == nil || user == nil || *psc.FSGroup != *user {
				p("fsGroup must be the user's group (%d), so that the token (mode 0440) and the workspace are the user's", uid)
			}
		}
	}

	// It listens where the probes and the Service reach it.
	listen, ok := flagValue(args, "--listen")
	ports := map[string]int32{}
	var port int32
	if !ok {
		p("no --listen: serve would listen on 127.0.0.1:8765 only, out of the kubelet's reach")
	} else {
		host, ps, found := strings.Cut(listen, ":")
		n, err := strconv.ParseInt(ps, 10, 32)
		if !found || err != nil || n <= 0 || n > 65535 || host == "127.0.0.1" || host == "localhost" {
			p("--listen %q: want 0.0.0.0:PORT (the probes come from outside the pod's loopback)", listen)
		}
		port = int32(n)
		ports[""] = port
	}
	hasPort := false
	for _, cp := range c.Ports {
		if cp.Name != "" {
			if msgs := validation.IsValidPortName(cp.Name); len(msgs) > 0 {
				p("port name %q: %s", cp.Name, strings.Join(msgs, "; "))
			}
			ports[cp.Name] = cp.ContainerPort
		}
		hasPort = hasPort || cp.ContainerPort == port
	}
	if !hasPort {
		p("no containerPort %d (the --listen port)", port)
	}
	probe := func(what string, pr *corev1.Probe, path string) {
		if pr == nil || pr.HTTPGet == nil {
			p("%s must be an httpGet probe of %s", what, path)
			return
		}
		if pr.HTTPGet.Path != path {
			p("%s probes %q, want %s", what, pr.HTTPGet.Path, path)
		}
		if n, ok := resolvePort(pr.HTTPGet.Port, ports); !ok || n != port {
			p("%s probes port %s, not the --listen port %d", what, pr.HTTPGet.Port.String(), port)
		}
		if pr.HTTPGet.Scheme != "" && pr.HTTPGet.Scheme != corev1.URISchemeHTTP {
			p("%s uses %s; agentexec serves plain HTTP", what, pr.HTTPGet.Scheme)
		}
	}
	probe("livenessProbe", c.LivenessProbe, "/livez")
	probe("readinessProbe", c.ReadinessProbe, "/readyz")
	if c.StartupProbe != nil {
		probe("startupProbe", c.StartupProbe, "/livez")
	}

	// Requests and limits.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[r]
		lim, hasLim := c.Resources.Limits[r]
		if !hasReq || !hasLim {
			p("resources must give both a request and a limit of %s", r)
			continue
		}
		if req.Cmp(lim) > 0 {
			p("the %s request %s is above its limit %s", r, req.String(), lim.String())
		}
	}

	// Writable places under a read-only root.
	for _, w := range []struct{ path, why string }{
		{"/tmp", "the commands' private /tmp and the jobs' state"},
		{homeDir, "HOME: the tool cache and the audit log"},
	} {
		m := mountOf(c, w.path)
		if m == nil || m.MountPath != w.path {
			p("%s must be a volume of its own (%s)", w.path, w.why)
			continue
		}
		if v, ok := volumes[m.Name]; !ok || v.EmptyDir == nil {
			p("%s must be an emptyDir (%s)", w.path, w.why)
		} else if m.ReadOnly {
			p("%s must be writable", w.path)
		}
	}
	if m := mountOf(c, workspaceDir); m == nil || m.MountPath != workspaceDir || m.ReadOnly {
		p("the workspace %s must be a writable volume", workspaceDir)
	}

	// A clean shutdown within the pod's termination grace.
	termination := int64(30)
	if spec.TerminationGracePeriodSeconds != nil {
		termination = *spec.TerminationGracePeriodSeconds
	}
	if g, ok := flagValue(args, "--grace"); ok {
		d, err := time.ParseDuration(g)
		if err != nil {
			p("--grace %q: %v", g, err)
		} else if d >= time.Duration(termination)*time.Second {
			p("--grace %s is not below terminationGracePeriodSeconds (%ds): the kubelet would kill agentexec before it ends its commands", g, termination)
		}
	}
	return ports, problems
}

// mountOf returns the volume mount holding path (the deepest).
func mountOf(c *corev1.Container, path string) *corev1.VolumeMount {
	var best *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		mp := strings.TrimSuffix(m.MountPath, "/")
		if (path == mp || strings.HasPrefix(path, mp+"/")) && (best == nil || len(mp) > len(best.MountPath)) {
			best = m
		}
	}
	return best
}
