package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/kubeserver"
)

// manifestsDir holds the Kubernetes manifests users apply.
const manifestsDir = "../../deploy/kubernetes"

// manifest is one YAML document of a file under manifestsDir.
type manifest struct {
	file string
	obj  *unstructured.Unstructured
}

func (m manifest) String() string {
	return m.file + ": " + m.obj.GetKind() + " " + m.obj.GetName()
}

// readManifests returns every YAML document under manifestsDir, skipping
// those that hold only comments.
func readManifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	err := filepath.WalkDir(manifestsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r := utilyaml.NewYAMLReader(bufio.NewReader(f))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			js, err := yaml.YAMLToJSON(doc)
			if err != nil {
				return err
			}
			if string(bytes.TrimSpace(js)) == "null" {
				continue
			}
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(js); err != nil {
				return err
			}
			rel, _ := filepath.Rel(manifestsDir, path)
			out = append(out, manifest{file: rel, obj: obj})
		}
	})
	require.NoError(t, err)
	return out
}

// TestKubernetesManifests applies every manifest under deploy/kubernetes
// to a kube-apiserver with a server-side dry-run and strict field
// validation (an unknown or misspelt field is refused, as a real apply
// would refuse it), and checks that k8s/rbac.yaml and k8s/policy.yaml are
// what `tenure migrate --print --grant` prints, that the Deployments'
// probes are /readyz and /livez on the port --health serves (never the
// holder-only /leaderz, which would stall a rolling update), that the
// pods' grace exceeds --grace, and that tenure accepts their arguments.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	docs := readManifests(t)

	t.Run("Grant", func(t *testing.T) {
		t.Parallel()
		grant := run(t, testEnv(t), "migrate", "--print", "--grant", "tenure", "--store", "k8s://tenure")
		require.Equal(t, 0, grant.code, grant.stderr.all())
		rbac, err := os.ReadFile(filepath.Join(manifestsDir, "k8s", "rbac.yaml"))
		require.NoError(t, err)
		policy, err := os.ReadFile(filepath.Join(manifestsDir, "k8s", "policy.yaml"))
		require.NoError(t, err)
		// rbac.yaml is a comment and then the Role and RoleBinding as
		// printed; policy.yaml is the rest, the admission policy.
		body := string(rbac)
		for strings.HasPrefix(body, "#") {
			_, body, _ = strings.Cut(body, "\n")
		}
		require.Equal(t, grant.stdout.all(), strings.TrimSuffix(body+"---\n"+string(policy), "\n"),
			"deploy/kubernetes/k8s/rbac.yaml (after its comment) and policy.yaml must be what tenure migrate --print --grant tenure --store k8s://tenure prints")
	})

	t.Run("Deployments", func(t *testing.T) {
		t.Parallel()
		var n int
		for _, m := range docs {
			if m.obj.GetKind() != "Deployment" {
				continue
			}
			n++
			// Postgres, K8s: the directory, as a CamelCase subtest name.
			dir := filepath.Dir(m.file)
			t.Run(strings.ToUpper(dir[:1])+dir[1:], func(t *testing.T) {
				t.Parallel()
				checkDeployment(t, m)
			})
		}
		require.Equal(t, 2, n, "a Deployment against PostgreSQL and one against Lease objects")
	})

	t.Run("DryRun", func(t *testing.T) {
		t.Parallel()
		srv := kubeserver.Own(t)
		ctx := t.Context()
		dc, err := discovery.NewDiscoveryClientForConfig(srv.Admin())
		require.NoError(t, err)
		groups, err := restmapper.GetAPIGroupResources(dc)
		require.NoError(t, err)
		mapper := restmapper.NewDiscoveryRESTMapper(groups)
		client, err := dynamic.NewForConfig(srv.Admin())
		require.NoError(t, err)
		apply := func(m manifest, dryRun bool) error {
			gvk := m.obj.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return err
			}
			var r dynamic.ResourceInterface = client.Resource(mapping.Resource)
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				require.NotEmpty(t, m.obj.GetNamespace(), "%s names no namespace: kubectl apply would put it in the current context's", m)
				r = client.Resource(mapping.Resource).Namespace(m.obj.GetNamespace())
			}
			body, err := m.obj.MarshalJSON()
			if err != nil {
				return err
			}
			opts := metav1.PatchOptions{FieldManager: "tenure-deploy-test", FieldValidation: metav1.FieldValidationStrict}
			if dryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			_, err = r.Patch(ctx, m.obj.GetName(), types.ApplyPatchType, body, opts)
			return err
		}

		// The namespace for real: a dry-run creates nothing, and the
		// namespaced objects need it to exist.
		var ns []manifest
		for _, m := range docs {
			if m.obj.GetKind() == "Namespace" {
				ns = append(ns, m)
				require.NoError(t, apply(m, false), "%s", m)
			}
		}
		require.Len(t, ns, 1, "namespace.yaml names the namespace the others are in")
		kinds := map[string]bool{}
		for _, m := range docs {
			kinds[m.obj.GetKind()] = true
			if m.obj.GetKind() != "Namespace" {
				require.NoError(t, apply(m, true), "server-side dry-run apply of %s", m)
			}
		}
		for _, kind := range []string{"Deployment", "Secret", "ServiceAccount", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			require.True(t, kinds[kind], "deploy/kubernetes holds a %s", kind)
		}

		// The check can fail: a misspelt field is refused.
		i := slices.IndexFunc(docs, func(m manifest) bool { return m.obj.GetKind() == "Deployment" })
		bad := manifest{file: docs[i].file, obj: docs[i].obj.DeepCopy()}
		containers, _, err := unstructured.NestedSlice(bad.obj.Object, "spec", "template", "spec", "containers")
		require.NoError(t, err)
		containers[0].(map[string]any)["livenesProbe"] = map[string]any{"httpGet": map[string]any{"path": "/livez", "port": "health"}}
		require.NoError(t, unstructured.SetNestedSlice(bad.obj.Object, containers, "spec", "template", "spec", "containers"))
		err = apply(bad, true)
		require.ErrorContains(t, err, `livenesProbe: field not declared in schema`)
	})
}

// checkDeployment checks m's probes and grace against the arguments of
// its tenure run, and runs those arguments (with a job that exits at
// once) to show tenure accepts them.
func checkDeployment(t *testing.T, m manifest) {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m.obj.Object, &d, true))
	require.GreaterOrEqual(t, *d.Spec.Replicas, int32(2), "a standby beside the holder")
	pod := d.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Equal(t, []string{"tenure"}, c.Command)
	require.Equal(t, "run", c.Args[0])
	dash := slices.Index(c.Args, "--")
	require.Positive(t, dash, "the job follows --")
	flags := c.Args[:dash]
	require.Contains(t, flags, "--wait", "a standby waits for the lease instead of exiting 75 and restarting")
	flag := func(name string) string {
		i := slices.Index(flags, name)
		require.Positive(t, i, "tenure run %s", name)
		require.Less(t, i+1, len(flags), "tenure run %s needs a value", name)
		return flags[i+1]
	}

	health := flag("--health")
	_, port, ok := strings.Cut(health, ":")
	require.True(t, ok, "--health %s", health)
	probe := func(p *corev1.Probe, path string) {
		require.NotNil(t, p, "a probe on %s", path)
		require.NotNil(t, p.HTTPGet)
		require.Equal(t, path, p.HTTPGet.Path)
		named := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.HTTPGet.Port.String() })
		require.GreaterOrEqual(t, named, 0, "the probe's port %s is a named port of the container", p.HTTPGet.Port.String())
		require.Equal(t, port, strconv.Itoa(int(c.Ports[named].ContainerPort)), "the probe's port is the one --health serves")
	}
	probe(c.ReadinessProbe, "/readyz")
	probe(c.LivenessProbe, "/livez")
	require.Nil(t, c.StartupProbe)

	grace, err := time.ParseDuration(flag("--grace"))
	require.NoError(t, err)
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	require.Greater(t, time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second, grace,
		"the kubelet's SIGKILL must come after tenure's own, --grace after SIGTERM")

	sc := c.SecurityContext
	require.NotNil(t, sc)
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.True(t, *sc.ReadOnlyRootFilesystem)
	require.False(t, *sc.AllowPrivilegeEscalation)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	require.NotEmpty(t, c.Resources.Requests)

	// tenure accepts the arguments: the same flags over a store that is
	// always granted, a free port and a job that exits at once.
	args := slices.Clone(flags)
	args[slices.Index(args, "--health")+1] = "127.0.0.1:0"
	env := testEnv(t)
	if i := slices.Index(args, "--store"); i > 0 {
		require.True(t, strings.HasPrefix(args[i+1], "k8s://"), "--store %s", args[i+1])
		args[i+1] = "always:deploy-test"
	} else {
		require.True(t, slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == storeurl.EnvVar && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
		}), "without --store, %s comes from a Secret", storeurl.EnvVar)
		env = append(env, storeurl.EnvVar+"=always:deploy-test")
	}
	p := run(t, env, append(args, "--", "true")...)
	require.Equal(t, 0, p.code, p.stderr.all())
}
