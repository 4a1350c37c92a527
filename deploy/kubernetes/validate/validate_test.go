package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// manifests lists the YAML files of deploy/kubernetes.
func manifests(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../*/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	return files
}

// TestManifests: every manifest decodes strictly into its API's types and
// passes the semantic checks; the shapes the README describes are all
// there.
func TestManifests(t *testing.T) {
	var all []Object
	for _, f := range manifests(t) {
		objs, err := LoadFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
		all = append(all, objs...)
		// Each directory is a shape that must stand on its own.
		for _, e := range Check(objs) {
			if !strings.Contains(e.Error(), "names no") && !strings.Contains(e.Error(), "selects no") {
				t.Errorf("%s: %v", f, e)
			}
		}
	}
	for _, e := range Check(all) {
		t.Error(e)
	}
	var kinds []string
	for _, o := range all {
		kinds = append(kinds, o.Kind)
	}
	for _, want := range []string{"SandboxTemplate", "SandboxWarmPool", "SandboxClaim", "Deployment", "Service", "PersistentVolumeClaim", "NetworkPolicy"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no %s among the manifests (%v)", want, kinds)
		}
	}
}

// TestRejects: each guarantee of the manifests, broken on purpose, is
// caught: by the strict decoding or by a named semantic check.
func TestRejects(t *testing.T) {
	const (
		tmpl = "../agent-sandbox/sandboxtemplate.yaml"
		dep  = "../deployment/deployment.yaml"
		car  = "../sidecar/deployment.yaml"
	)
	for _, c := range []struct {
		name, file, old, new, want string
	}{
		{"unknown field", dep, "runAsNonRoot: true\n        runAsUser", "runAsNonRoot: true\n        runAsUserr", `unknown field "spec.template.spec.securityContext.runAsUserr"`},
		{"field names are case-sensitive", tmpl, "readOnlyRootFilesystem: true", "ReadOnlyRootFilesystem: true", "unknown field"},
		{"duplicate key", dep, "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: true\n            readOnlyRootFilesystem: false", `key "readOnlyRootFilesystem" already set`},
		{"wrong type", dep, "replicas: 1", `replicas: "one"`, "replicas"},
		{"bad quantity", tmpl, "memory: 2Gi", "memory: 2 gigs", "quantities must match"},
		{"unknown apiVersion", tmpl, "extensions.agents.x-k8s.io/v1beta1", "extensions.agents.x-k8s.io/v1alpha9", "is not one the manifests use"},
		{"unknown field in the sandbox API", tmpl, "networkPolicyManagement: Managed", "networkPolicyManagment: Managed", "unknown field"},
		{"CRD enum", tmpl, "networkPolicyManagement: Managed", "networkPolicyManagement: Sometimes", "Managed or Unmanaged"},
		{"claims overriding the environment", tmpl, "envVarsInjectionPolicy: Disallowed", "envVarsInjectionPolicy: Overrides", "replace agentexec's environment"},
		{"root", dep, "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot must be true"}, // pod and container
		{"container overrides the pod to root", dep, "            runAsNonRoot: true\n", "            runAsNonRoot: false\n", "runAsNonRoot must be true"},
		{"uid 0", dep, "runAsUser: 65532", "runAsUser: 0", "runAsUser must be set to a non-root uid"},
		{"capabilities kept", tmpl, `drop: ["ALL"]`, `drop: ["NET_RAW"]`, "capabilities.drop must hold ALL"},
		{"capability added", dep, `drop: ["ALL"]`, `drop: ["ALL"]` + "\n              add: [\"SYS_ADMIN\"]", "capabilities.add must be empty"},
		{"privilege escalation", dep, "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "allowPrivilegeEscalation must be false"},
		{"privileged", dep, "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: false\n            privileged: true", "must not be privileged"},
		{"unconfined seccomp", tmpl, "            seccompProfile:\n              type: RuntimeDefault", "            seccompProfile:\n              type: Unconfined", "seccompProfile must be RuntimeDefault"},
		{"writable root", tmpl, "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem must be true"},
		{"service account token", dep, "automountServiceAccountToken: false", "automountServiceAccountToken: true", "automountServiceAccountToken must be false"},
		{"host network", dep, "automountServiceAccountToken: false", "automountServiceAccountToken: false\n      hostNetwork: true", "hostNetwork"},
		{"hostPath volume", dep, "          emptyDir:\n            sizeLimit: 2Gi", "          hostPath:\n            path: /tmp", "is a hostPath"},
		{"liveness path", tmpl, "path: /livez\n              port: mcp\n            periodSeconds: 10", "path: /healthz\n              port: mcp\n            periodSeconds: 10", `livenessProbe probes "/healthz", want /livez`},
		{"readiness path", dep, "path: /readyz", "path: /livez", `readinessProbe probes "/livez", want /readyz`},
		{"readiness port", dep, "path: /readyz\n              port: mcp", "path: /readyz\n              port: 9999", "not the --listen port"},
		{"no readiness probe", car, "          readinessProbe:\n            httpGet:\n              path: /readyz\n              port: mcp\n", "          readinessProbe:\n            exec:\n              command: [\"true\"]\n", "readinessProbe must be an httpGet probe"},
		{"token as a literal", dep, `"--token-file", "/var/run/secrets/agentexec/token", `, "", "no --token-file"},
		{"token in the environment", dep, "          ports:\n", "          env:\n            - name: AGENTEXEC_TOKEN\n              value: hunter2hunter2\n          ports:\n", "AGENTEXEC_TOKEN is a literal"},
		{"token not from a Secret", dep, "          secret:\n            secretName: agentexec-token\n            defaultMode: 0440", "          emptyDir: {}", "which is not a Secret"},
		{"token readable by others", dep, "defaultMode: 0440", "defaultMode: 0444", "others may read it"},
		{"token unreadable by the user", dep, "defaultMode: 0440", "defaultMode: 0400", "cannot read them"},
		{"token mount writable", dep, "mountPath: /var/run/secrets/agentexec\n              readOnly: true", "mountPath: /var/run/secrets/agentexec", "mounted readOnly"},
		{"loopback only", dep, `"0.0.0.0:8765"`, `"127.0.0.1:8765"`, "want 0.0.0.0:PORT"},
		{"port mismatch", dep, "containerPort: 8765", "containerPort: 8080", "no containerPort 8765"},
		{"no memory limit", tmpl, "              memory: 2Gi\n", "", "request and a limit of memory"},
		{"request above limit", dep, "cpu: 500m", "cpu: \"8\"", "cpu request 8 is above its limit 4"},
		{"no writable /tmp", dep, "            - name: tmp\n              mountPath: /tmp\n", "", "/tmp must be a volume of its own"},
		{"tool cache not an emptyDir", dep, "        - name: home\n          emptyDir:\n            sizeLimit: 4Gi", "        - name: home\n          persistentVolumeClaim:\n            claimName: x", "must be an emptyDir"},
		{"read-only workspace", dep, "mountPath: /workspace\n", "mountPath: /workspace\n              readOnly: true\n", "workspace /workspace must be a writable volume"},
		{"mount of nothing", tmpl, "        name: workspace\n      spec:", "        name: work\n      spec:", `mounts "workspace", which is neither`},
		{"grace beyond the termination grace", dep, `"--grace", "20s"`, `"--grace", "45s"`, "is not below terminationGracePeriodSeconds"},
		{"policy open to all", "../deployment/networkpolicy.yaml", "    - from:\n        - podSelector:\n            matchLabels:\n              agentexec-client: \"true\"\n      ports:", "    - ports:", "admits every source"},
		{"policy on another port", "../deployment/networkpolicy.yaml", "port: mcp", "port: 22", "port 22 is not agentexec's"},
		{"sidecar that is a plain init container", car, "          restartPolicy: Always\n", "", "native sidecar"},
		{"no agentexec container", dep, "        - name: agentexec\n", "        - name: agentexec2\n", `no container named "agentexec"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), c.old) {
				t.Fatalf("%s does not hold %q", c.file, c.old)
			}
			broken := strings.Replace(string(b), c.old, c.new, 1)
			if c.name == "root" {
				broken = strings.ReplaceAll(string(b), c.old, c.new)
			}
			objs, err := Load(filepath.Base(c.file), []byte(broken))
			var msgs []string
			if err != nil {
				msgs = append(msgs, err.Error())
			}
			if strings.HasSuffix(c.file, "networkpolicy.yaml") {
				// The policy is checked against the pods it guards.
				pods, err := LoadFile(dep)
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, pods...)
			}
			for _, e := range Check(objs) {
				msgs = append(msgs, e.Error())
			}
			got := strings.Join(msgs, "\n")
			if !strings.Contains(got, c.want) {
				t.Errorf("want an error containing %q, got:\n%s", c.want, got)
			}
		})
	}
}

// TestCrossReferences: a warm pool must name a template, a claim a pool,
// a Service agentexec's pods and port.
func TestCrossReferences(t *testing.T) {
	load := func(name, doc string) []Object {
		objs, err := Load(name, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	pool := load("pool", "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata:\n  name: p\nspec:\n  sandboxTemplateRef:\n    name: nope\n")
	claim := load("claim", "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata:\n  name: c\nspec:\n  warmPoolRef:\n    name: other\n")
	svc := load("svc", "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  type: LoadBalancer\n  selector:\n    app: x\n  ports:\n  - port: 80\n")
	got := ""
	for _, e := range Check(append(append(pool, claim...), svc...)) {
		got += e.Error() + "\n"
	}
	for _, want := range []string{`sandboxTemplateRef.name "nope" names no SandboxTemplate`, `warmPoolRef.name "other" names no SandboxWarmPool`, "selects no agentexec pod"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
	dep, err := LoadFile("../deployment/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svc = load("svc", "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  type: NodePort\n  selector:\n    app.kubernetes.io/name: agentexec\n  ports:\n  - port: 80\n    targetPort: 8080\n")
	got = ""
	for _, e := range Check(append(dep, svc...)) {
		got += e.Error() + "\n"
	}
	for _, want := range []string{"NodePort exposes agentexec beyond the cluster", "targetPort 8080 is not agentexec's port"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
}

// TestMultiDocument: documents separated by --- are each checked, and
// empty or comment-only ones are skipped.
func TestMultiDocument(t *testing.T) {
	objs, err := Load("x", []byte("# header\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: a\nspec: {}\n---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"))
	if len(objs) != 1 || objs[0].Name != "a" || err == nil || !strings.Contains(err.Error(), "x#4") || !strings.Contains(err.Error(), `kind "ConfigMap"`) {
		t.Errorf("%+v %v", objs, err)
	}
}
