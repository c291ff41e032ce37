// Package validate checks deploy/kubernetes/*.yaml offline against the
// official Kubernetes API types (k8s.io/api), decoded strictly by
// k8s.io/apimachinery: an unknown or duplicate field, a wrong type or an
// unknown kind fails. It is a module of its own so that the relay's
// go.mod stays free of the Kubernetes libraries; scripts/test.sh runs it.
package validate

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// decoder decodes YAML strictly into the core, apps and policy types.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
}

// decodeAll splits a multi-document YAML stream and decodes each document.
func decodeAll(t *testing.T, dec runtime.Decoder, name string, data []byte) ([]runtime.Object, error) {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufioReader(data))
	var objs []runtime.Object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, errorf("%s document %d: %v", name, i+1, err)
		}
		objs = append(objs, obj)
	}
}

// TestStrictDecodingRefuses shows the decoder is strict: an unknown
// field, a duplicate field and a mistyped value each fail.
func TestStrictDecodingRefuses(t *testing.T) {
	dec := decoder(t)
	for name, c := range map[string]struct{ doc, want string }{
		"unknown field":   {"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {app: x}}\n", `strict decoding error: unknown field "spec.selectr"`},
		"duplicate field": {"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nmetadata: {name: b}\n", `"metadata" already set in map`},
		"wrong type":      {"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: two}\n", "DeploymentSpec.spec.replicas of type int32"},
		"unknown kind":    {"apiVersion: v1\nkind: Servic\nmetadata: {name: x}\n", `no kind "Servic" is registered`},
	} {
		_, err := decodeAll(t, dec, name, []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, c.want)
		}
	}
}

// TestManifests decodes every deploy/kubernetes/*.yaml strictly and checks
// what the many-process PostgreSQL layout relies on.
func TestManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes (%v)", err)
	}
	dec := decoder(t)
	var deployments []*appsv1.Deployment
	var pdbs []*policyv1.PodDisruptionBudget
	var services []*corev1.Service
	var secrets []*corev1.Secret
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(t, dec, filepath.Base(f), data)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			switch o := o.(type) {
			case *appsv1.Deployment:
				deployments = append(deployments, o)
			case *policyv1.PodDisruptionBudget:
				pdbs = append(pdbs, o)
			case *corev1.Service:
				services = append(services, o)
			case *corev1.Secret:
				secrets = append(secrets, o)
			default:
				t.Errorf("%s: unexpected kind %T", f, o)
			}
		}
	}
	if len(deployments) != 1 || len(pdbs) != 1 || len(services) != 1 || len(secrets) != 1 {
		t.Fatalf("want one Deployment, PodDisruptionBudget, Service and Secret; got %d, %d, %d, %d",
			len(deployments), len(pdbs), len(services), len(secrets))
	}
	d, pdb, svc := deployments[0], pdbs[0], services[0]
	podLabels := labels.Set(d.Spec.Template.Labels)
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	if !sel.Matches(podLabels) {
		t.Errorf("Deployment selector %v does not match its pods' labels %v", sel, podLabels)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("Deployment replicas %v: the PostgreSQL layout runs several processes", d.Spec.Replicas)
	}

	c := d.Spec.Template.Spec.Containers
	if len(c) != 1 {
		t.Fatalf("%d containers, want 1", len(c))
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe on %s", name, path)
			return
		}
		if p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s: httpGet %s on port %v, want %s on port http", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
		}
	}
	probe("readinessProbe", c[0].ReadinessProbe, "/readyz")
	probe("livenessProbe", c[0].LivenessProbe, "/healthz")
	if !slices.ContainsFunc(c[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" && p.ContainerPort == 8080 }) {
		t.Errorf("container ports %v: want http 8080", c[0].Ports)
	}
	var dbURL bool
	for _, e := range c[0].Env {
		if e.Name == "ACRELAY_DATABASE_URL" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			dbURL = true
		}
	}
	if !dbURL {
		t.Error("ACRELAY_DATABASE_URL does not come from a Secret: several processes share one PostgreSQL")
	}
	sc := c[0].SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("container securityContext: want readOnlyRootFilesystem and no privilege escalation")
	}
	if ps := d.Spec.Template.Spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Error("pod securityContext: want runAsNonRoot")
	}

	// Replicas on different nodes (and zones when there are some): one
	// node's loss leaves a relay serving.
	aff := d.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil {
		t.Fatal("no podAntiAffinity")
	}
	var hostname bool
	for _, w := range aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		term := w.PodAffinityTerm
		s, err := metav1LabelSelector(term.LabelSelector)
		if err != nil {
			t.Fatal(err)
		}
		if term.TopologyKey == corev1.LabelHostname && s.Matches(podLabels) {
			hostname = true
		}
	}
	if !hostname {
		t.Errorf("podAntiAffinity: want a term on %s selecting the relay's own pods", corev1.LabelHostname)
	}

	// The budget keeps one relay serving through voluntary disruptions.
	pdbSel, err := metav1LabelSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !pdbSel.Matches(podLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not select the relay's pods %v", pdbSel, podLabels)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget: minAvailable %v maxUnavailable %v, want minAvailable ≥ 1", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	} else if int32(pdb.Spec.MinAvailable.IntValue()) >= *d.Spec.Replicas {
		t.Errorf("PodDisruptionBudget minAvailable %d ≥ replicas %d: a drain could never evict", pdb.Spec.MinAvailable.IntValue(), *d.Spec.Replicas)
	}

	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service selector %v does not select the relay's pods", svc.Spec.Selector)
	}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort != intstr.FromString("http") {
			t.Errorf("Service port %s targets %v: /metrics (port metrics, no token) must stay off the Service", p.Name, p.TargetPort.String())
		}
	}
	if !strings.Contains(secrets[0].StringData["database-url"], "CHANGE-ME") {
		t.Error("the Secret's database-url should be a placeholder marked CHANGE-ME")
	}
}
