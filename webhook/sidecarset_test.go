package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// M1's hashes (compat §4.3), OpenKruise's values for its SidecarSet.
const (
	m1Hash             = "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684"
	m1HashWithoutImage = "82684vwf9d4cb4wz4vffx4ddfbb47ww4z4wwxdbwb8w2zbb7zvf4524cdd49bv94"
)

// m1 is compat §4.3 M1's SidecarSet, as a user writes it.
const m1 = `{"apiVersion":"apps.kruise.io/v1alpha1","kind":"SidecarSet","metadata":{"name":"sidecarset-test"},
"spec":{"containers":[{"name":"dns-f","image":"dns:1.0"}],
"patchPodMetadata":[{"annotations":{"key1":"value1"}}],
"injectionStrategy":{"revision":{"customVersion":"1"}}}}`

func TestSidecarSetDefaulter(t *testing.T) {
	defaulted := minimalSidecarSet("done", "web", "agent")
	require.NoError(t, defaults.SidecarSetAndHash(defaulted))

	// raw is a v1alpha1 request, as m1 is written.
	raw := func(s string) admissionv1.AdmissionRequest {
		r := sidecarSetRequest(t, admissionv1.Create, nil, nil)
		r.Kind.Version = "v1alpha1"
		r.Object = runtime.RawExtension{Raw: []byte(s)}
		return r
	}
	tests := []struct {
		name    string
		req     admissionv1.AdmissionRequest
		allowed bool
		code    int32
		message string
		// check gets the SidecarSet the patch yields; nil when the response must carry no patch.
		check func(t *testing.T, resp *admissionv1.AdmissionResponse, ss *v1beta1.SidecarSet)
	}{{
		name:    "M1 defaults and both hashes, in the patch",
		req:     raw(m1),
		allowed: true, code: 200,
		check: func(t *testing.T, resp *admissionv1.AdmissionResponse, ss *v1beta1.SidecarSet) {
			var ops []map[string]any
			require.NoError(t, json.Unmarshal(resp.Patch, &ops))
			values := map[string]bool{}
			collectStrings(ops, values)
			assert.True(t, values[m1Hash], "patch carries kruise.io/sidecarset-hash %s: %s", m1Hash, resp.Patch)
			assert.True(t, values[m1HashWithoutImage], "patch carries kruise.io/sidecarset-hash-without-image: %s", resp.Patch)

			assert.Equal(t, m1Hash, ss.Annotations[v1beta1.SidecarSetHashAnnotation])
			assert.Equal(t, m1HashWithoutImage, ss.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation])
			us := ss.Spec.UpdateStrategy
			assert.Equal(t, v1beta1.RollingUpdateSidecarSetStrategyType, us.Type)
			assert.Equal(t, intstr.FromInt32(0), *us.Partition)
			assert.Equal(t, intstr.FromInt32(1), *us.MaxUnavailable)
			c := ss.Spec.Containers[0]
			assert.Equal(t, v1beta1.BeforeAppContainerType, c.PodInjectPolicy)
			assert.Equal(t, v1beta1.ShareVolumePolicyDisabled, c.ShareVolumePolicy.Type)
			assert.Equal(t, v1beta1.SidecarContainerColdUpgrade, c.UpgradeStrategy.UpgradeType)
			assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
			assert.Equal(t, "/dev/termination-log", c.TerminationMessagePath)
			assert.Equal(t, corev1.TerminationMessageReadFile, c.TerminationMessagePolicy)
			assert.Equal(t, v1beta1.SidecarSetRetainPatchPolicy, ss.Spec.PatchPodMetadata[0].PatchPolicy)
			assert.Equal(t, v1beta1.AlwaysSidecarSetInjectRevisionPolicy, ss.Spec.InjectionStrategy.Revision.Policy)
		},
	}, {
		name:    "M3/M7 minimal v1alpha1 CREATE: allowed with defaults",
		req:     sidecarSetRequest(t, admissionv1.Create, minimalSidecarSet("minimal", "web", "agent"), nil),
		allowed: true, code: 200,
		check: func(t *testing.T, _ *admissionv1.AdmissionResponse, ss *v1beta1.SidecarSet) {
			assert.Equal(t, v1beta1.BeforeAppContainerType, ss.Spec.Containers[0].PodInjectPolicy)
			assert.NotEmpty(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation])
		},
	}, {
		name:    "M4 UPDATE: allowed with defaults",
		req:     sidecarSetRequest(t, admissionv1.Update, minimalSidecarSet("minimal", "web", "agent"), defaulted),
		allowed: true, code: 200,
		check: func(t *testing.T, _ *admissionv1.AdmissionResponse, ss *v1beta1.SidecarSet) {
			assert.NotEmpty(t, ss.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation])
		},
	}, {
		name:    "already defaulted and hashed: no patch",
		req:     sidecarSetRequest(t, admissionv1.Create, defaulted, nil),
		allowed: true, code: 200,
	}, {
		name: "M5 unknown version: 400",
		req: func() admissionv1.AdmissionRequest {
			r := raw(m1)
			r.Kind.Version = "v1alpha999"
			return r
		}(),
		code: http.StatusBadRequest, message: `unsupported version "v1alpha999"`,
	}, {
		name:    "v1alpha1 keeps its spec.namespace as written: the patch does not turn it into a namespaceSelector",
		req:     raw(`{"apiVersion":"apps.kruise.io/v1alpha1","kind":"SidecarSet","metadata":{"name":"ns","labels":{"apps.kruise.io/sidecarset-custom-version":"v3"}},"spec":{"namespace":"shop","selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"agent","image":"agent:1"}]}}`),
		allowed: true, code: 200,
		check: func(t *testing.T, resp *admissionv1.AdmissionResponse, _ *v1beta1.SidecarSet) {
			var alpha v1alpha1.SidecarSet
			applyPatch(t, resp, []byte(`{"apiVersion":"apps.kruise.io/v1alpha1","kind":"SidecarSet","metadata":{"name":"ns","labels":{"apps.kruise.io/sidecarset-custom-version":"v3"}},"spec":{"namespace":"shop","selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"agent","image":"agent:1"}]}}`), &alpha)
			assert.Equal(t, "shop", alpha.Spec.Namespace)
			assert.Nil(t, alpha.Spec.NamespaceSelector)
			assert.Equal(t, "v3", alpha.Labels[v1beta1.SidecarSetCustomVersionLabel], "the custom-version label stays a label")
			assert.Equal(t, "apps.kruise.io/v1alpha1", alpha.APIVersion)
			assert.NotContains(t, string(resp.Patch), "customVersion")
			assert.NotEmpty(t, alpha.Annotations[v1beta1.SidecarSetHashAnnotation])
		},
	}, {
		name: "v1beta1 is defaulted as v1beta1",
		req: func() admissionv1.AdmissionRequest {
			ss := minimalSidecarSet("beta", "web", "agent")
			ss.Spec.CustomVersion = "v3"
			return sidecarSetRequest(t, admissionv1.Create, ss, nil)
		}(),
		allowed: true, code: 200,
		check: func(t *testing.T, _ *admissionv1.AdmissionResponse, ss *v1beta1.SidecarSet) {
			assert.Equal(t, "v3", ss.Spec.CustomVersion)
			assert.Empty(t, ss.Labels[v1beta1.SidecarSetCustomVersionLabel])
			assert.NotEmpty(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation])
		},
	}, {
		name: "wrong kind: 400",
		req: func() admissionv1.AdmissionRequest {
			r := raw(m1)
			r.Kind = podGVK
			return r
		}(),
		code: http.StatusBadRequest, message: "unsupported kind",
	}, {
		name: "M6 object is not JSON of a SidecarSet: 400",
		req:  raw(`"invalid json"`),
		code: http.StatusBadRequest, message: "decoding the SidecarSet",
	}, {
		name: "no object on CREATE: 400",
		req:  sidecarSetRequest(t, admissionv1.Create, nil, nil),
		code: http.StatusBadRequest, message: "the request has no SidecarSet",
	}, {
		name:    "M8 DELETE: allowed untouched",
		req:     sidecarSetRequest(t, admissionv1.Delete, nil, minimalSidecarSet("gone", "web", "agent")),
		allowed: true, code: 200,
	}, {
		name: "status subresource: allowed untouched",
		req: func() admissionv1.AdmissionRequest {
			r := sidecarSetRequest(t, admissionv1.Update, minimalSidecarSet("minimal", "web", "agent"), defaulted)
			r.SubResource = "status"
			return r
		}(),
		allowed: true, code: 200,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := admit(t, &SidecarSetDefaulter{}, tt.req)
			assert.Equal(t, tt.allowed, resp.Allowed)
			require.NotNil(t, resp.Result)
			assert.Equal(t, tt.code, resp.Result.Code)
			assert.Contains(t, resp.Result.Message, tt.message)
			if tt.check == nil {
				assert.Empty(t, resp.Patch, "%s", resp.Patch)
				return
			}
			var ss v1beta1.SidecarSet
			applyPatch(t, resp, tt.req.Object.Raw, &ss)
			tt.check(t, resp, &ss)
		})
	}
}

// M6: a body that is not JSON at all.
func TestSidecarSetDefaulterInvalidJSONBody(t *testing.T) {
	resp := post(t, httpHandler(&SidecarSetDefaulter{}), []byte("invalid json"))
	assert.False(t, resp.Allowed)
	assert.Equal(t, int32(http.StatusBadRequest), resp.Result.Code)
}

func collectStrings(v any, into map[string]bool) {
	switch x := v.(type) {
	case string:
		into[x] = true
	case []map[string]any:
		for _, e := range x {
			collectStrings(e, into)
		}
	case []any:
		for _, e := range x {
			collectStrings(e, into)
		}
	case map[string]any:
		for _, e := range x {
			collectStrings(e, into)
		}
	}
}

// validatorEngine holds sidecarset1 (compat §4.4 V21: selector a=b, container container-name, init container
// init-name, volume volume-name), a ControllerRevision of it, and a whitelist allowing annotation
// keys under allowed.example.com/.
func validatorEngine(t testing.TB) *engine.Engine {
	return newEngine(t, policyState{
		sidecarSets: []*v1beta1.SidecarSet{v21("sidecarset1")},
		revisions: []*appsv1.ControllerRevision{{
			ObjectMeta: metav1.ObjectMeta{Name: "sidecarset1-rev1", Labels: map[string]string{
				v1beta1.SidecarSetNameLabel: "sidecarset1", v1beta1.SidecarSetCustomVersionLabel: "v1",
			}},
			Revision: 1,
		}},
		admin: []*bundle.Bundle{whitelistBundle(`^allowed\.example\.com/`)},
	})
}

// v21 is compat §4.4 V21's SidecarSet under the given name.
func v21(name string) *v1beta1.SidecarSet {
	ss := minimalSidecarSet(name, "", "container-name")
	ss.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	ss.Spec.InitContainers = []v1beta1.SidecarContainer{sidecar("init-name", "busybox:1.0", "")}
	ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "volume-name", MountPath: "/v"}}
	ss.Spec.Volumes = []corev1.Volume{emptyDir("volume-name")}
	return ss
}

func TestSidecarSetValidator(t *testing.T) {
	eng := validatorEngine(t)
	valid := func(mutate ...func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
		ss := minimalSidecarSet("new", "web", "agent")
		for _, m := range mutate {
			m(ss)
		}
		return ss
	}
	// stored is sidecarset1 as the snapshot holds it (defaulted, hashed).
	stored, ok := eng.Current().SidecarSet("sidecarset1")
	require.True(t, ok)

	tests := []struct {
		name      string
		snapshots Snapshots // default: eng
		req       admissionv1.AdmissionRequest
		allowed   bool
		code      int32
		// message lists substrings of the result message; causes lists the fields of the 422 causes.
		message []string
		causes  []string
	}{{
		name:    "valid CREATE, not defaulted by the caller: allowed",
		req:     sidecarSetRequest(t, admissionv1.Create, valid(), nil),
		allowed: true, code: 200,
	}, {
		name: "decision D5: a volume without a source is defaulted to emptyDir and admitted",
		req: sidecarSetRequest(t, admissionv1.Create, valid(func(ss *v1beta1.SidecarSet) {
			ss.Spec.Volumes = []corev1.Volume{{Name: "no-source"}}
			ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "no-source", MountPath: "/x"}}
		}), nil),
		allowed: true, code: 200,
	}, {
		name:    "V1 no selector: 422 naming the field",
		req:     sidecarSetRequest(t, admissionv1.Create, valid(func(ss *v1beta1.SidecarSet) { ss.Spec.Selector = nil }), nil),
		code:    http.StatusUnprocessableEntity,
		message: []string{`SidecarSet.apps.kruise.io "new" is invalid`, "spec.selector: Required value: no selector defined for SidecarSet"},
		causes:  []string{"spec.selector"},
	}, {
		name: "several single-object errors are all listed",
		req: sidecarSetRequest(t, admissionv1.Create, valid(func(ss *v1beta1.SidecarSet) {
			ss.Spec.Selector = nil
			ss.Spec.Containers[0].Image = ""
		}), nil),
		code:    http.StatusUnprocessableEntity,
		message: []string{"spec.selector", "spec.containers[0].image"},
		causes:  []string{"spec.selector", "spec.containers[0].image"}, // in validation's order
	}, {
		name:    "V21 conflicting names: 422 naming the other SidecarSet, identical volume allowed",
		req:     sidecarSetRequest(t, admissionv1.Create, v21("sidecarset2"), nil),
		code:    http.StatusUnprocessableEntity,
		message: []string{"container container-name already exist in sidecarset1", "container init-name already exist in sidecarset1"},
		causes:  []string{"spec.containers[0].name", "spec.initContainers[0].name"},
	}, {
		name: "V38 same volume name, other definition: 422 naming the other",
		req: sidecarSetRequest(t, admissionv1.Create, valid(func(ss *v1beta1.SidecarSet) {
			ss.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
			ss.Spec.Volumes = []corev1.Volume{{Name: "volume-name", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/home/work"}}}}
		}), nil),
		code:    http.StatusUnprocessableEntity,
		message: []string{"volume volume-name is in conflict with sidecarset sidecarset1"},
		causes:  []string{"spec.volumes[0]"},
	}, {
		name: "patchPodMetadata key the whitelist refuses: 422 at the key",
		req: sidecarSetRequest(t, admissionv1.Create, valid(func(ss *v1beta1.SidecarSet) {
			ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
				Annotations: map[string]string{"allowed.example.com/a": "1", "other.example.com/x": "1"}}}
		}), nil),
		code:    http.StatusUnprocessableEntity,
		message: []string{"spec.patchPodMetadata[0].annotations[other.example.com/x]"},
		causes:  []string{"spec.patchPodMetadata[0].annotations[other.example.com/x]"},
	}, {
		name: "patchPodMetadata key the whitelist allows: allowed",
		req: sidecarSetRequest(t, admissionv1.Create, valid(func(ss *v1beta1.SidecarSet) {
			ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
				Annotations: map[string]string{"allowed.example.com/a": "1"}}}
		}), nil),
		allowed: true, code: 200,
	}, {
		name: "UPDATE adding a container: 422",
		req: sidecarSetRequest(t, admissionv1.Update, func() *v1beta1.SidecarSet {
			ss := stored.DeepCopy()
			ss.Spec.Containers = append(ss.Spec.Containers, sidecar("extra", "extra:1", ""))
			return ss
		}(), stored),
		code:    http.StatusUnprocessableEntity,
		message: []string{"container extra is not found"},
		causes:  []string{"spec.containers[1].name"},
	}, {
		name: "UPDATE of a SidecarSet the snapshot holds: no conflict with its old self",
		req: sidecarSetRequest(t, admissionv1.Update, func() *v1beta1.SidecarSet {
			ss := stored.DeepCopy()
			ss.Spec.Containers[0].Image = "example.com/container-name:2.0"
			return ss
		}(), stored),
		allowed: true, code: 200,
	}, {
		name: "UPDATE without the old object: 400",
		req: func() admissionv1.AdmissionRequest {
			r := sidecarSetRequest(t, admissionv1.Update, stored, nil)
			return r
		}(),
		code: http.StatusBadRequest, message: []string{"the request has no old SidecarSet"},
	}, {
		name: "revision found among the snapshot's ControllerRevisions: allowed",
		req: sidecarSetRequest(t, admissionv1.Create, valid(func(ss *v1beta1.SidecarSet) {
			ss.Name = "sidecarset1-canary"
			ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: ptrTo("sidecarset1-rev1")}
		}), nil),
		allowed: true, code: 200,
	}, {
		name: "V14 revision missing: 422",
		req: sidecarSetRequest(t, admissionv1.Create, valid(func(ss *v1beta1.SidecarSet) {
			ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: ptrTo("normal-sidecarset-01234")}
		}), nil),
		code:   http.StatusUnprocessableEntity,
		causes: []string{"spec.injectionStrategy.revision.customVersion"},
	}, {
		name: "V41 canary of a base the snapshot holds: allowed, and no conflict with its base",
		req: sidecarSetRequest(t, admissionv1.Create, func() *v1beta1.SidecarSet {
			ss := v21("sidecarset1-canary")
			ss.Annotations = map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true", v1beta1.SidecarSetBaseAnnotation: "sidecarset1"}
			ss.Spec.UpdateStrategy.Type = v1beta1.NotUpdateSidecarSetStrategyType
			return ss
		}(), nil),
		allowed: true, code: 200,
	}, {
		name: "V43 canary of a missing base: 422",
		req: sidecarSetRequest(t, admissionv1.Create, valid(func(ss *v1beta1.SidecarSet) {
			ss.Annotations = map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true", v1beta1.SidecarSetBaseAnnotation: "nonexistent-sidecarset"}
			ss.Spec.UpdateStrategy.Type = v1beta1.NotUpdateSidecarSetStrategyType
		}), nil),
		code:    http.StatusUnprocessableEntity,
		message: []string{"fetch base sidecarSet[nonexistent-sidecarset] failed"},
		causes:  []string{"metadata.annotations[apps.kruise.io/sidecarset-base]"},
	}, {
		name: "unknown version: 400",
		req: func() admissionv1.AdmissionRequest {
			r := sidecarSetRequest(t, admissionv1.Create, valid(), nil)
			r.Kind.Version = "v1alpha999"
			return r
		}(),
		code: http.StatusBadRequest, message: []string{"unsupported version"},
	}, {
		name: "malformed object: 400",
		req: func() admissionv1.AdmissionRequest {
			r := sidecarSetRequest(t, admissionv1.Create, valid(), nil)
			r.Object.Raw = []byte(`{"spec":{"containers":{}}}`)
			return r
		}(),
		code: http.StatusBadRequest, message: []string{"decoding the SidecarSet"},
	}, {
		name:    "DELETE: allowed",
		req:     sidecarSetRequest(t, admissionv1.Delete, nil, stored),
		allowed: true, code: 200,
	}, {
		name:      "policies not loaded: 503",
		snapshots: &engine.Engine{},
		req:       sidecarSetRequest(t, admissionv1.Create, valid(), nil),
		code:      http.StatusServiceUnavailable, message: []string{"policies not loaded yet"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snaps := tt.snapshots
			if snaps == nil {
				snaps = eng
			}
			resp := admit(t, &SidecarSetValidator{Snapshots: snaps}, tt.req)
			require.NotNil(t, resp.Result)
			assert.Equal(t, tt.allowed, resp.Allowed, resp.Result.Message)
			assert.Equal(t, tt.code, resp.Result.Code, resp.Result.Message)
			assert.Empty(t, resp.Patch)
			for _, m := range tt.message {
				assert.Contains(t, resp.Result.Message, m)
			}
			if tt.code != http.StatusUnprocessableEntity {
				return
			}
			assert.Equal(t, metav1.StatusReasonInvalid, resp.Result.Reason)
			require.NotNil(t, resp.Result.Details)
			assert.Equal(t, "SidecarSet", resp.Result.Details.Kind)
			var fields []string
			for _, c := range resp.Result.Details.Causes {
				fields = append(fields, c.Field)
			}
			assert.Equal(t, tt.causes, fields, resp.Result.Message)
		})
	}
}

// wideners records what the validator asks the prefilter to widen, failing with err.
type wideners struct {
	calls []string
	err   error
}

func (w *wideners) Widen(_ context.Context, ss, old *v1beta1.SidecarSet) error {
	call := ss.Name
	if old != nil {
		call += " from " + old.Spec.Containers[0].Image
	}
	w.calls = append(w.calls, call)
	return w.err
}

// The validator widens the pod webhook's match condition for every SidecarSet it admits, and only
// for those: not for one it refuses, not in a dry run; a SidecarSet it cannot widen for is refused.
func TestSidecarSetValidatorWidensThePrefilter(t *testing.T) {
	eng := validatorEngine(t)
	next := minimalSidecarSet("new", "web", "agent")
	prev := next.DeepCopy()
	prev.Spec.Containers[0].Image = "agent:0"
	dryRun := sidecarSetRequest(t, admissionv1.Create, next, nil)
	dryRun.DryRun = ptr.To(true)
	tests := []struct {
		name    string
		req     admissionv1.AdmissionRequest
		err     error
		code    int32
		calls   []string
		message string
	}{
		{name: "create", req: sidecarSetRequest(t, admissionv1.Create, next, nil), code: 200, calls: []string{"new"}},
		{name: "update", req: sidecarSetRequest(t, admissionv1.Update, next, prev), code: 200, calls: []string{"new from agent:0"}},
		{name: "dry run", req: dryRun, code: 200},
		{name: "refused", req: sidecarSetRequest(t, admissionv1.Create, v21("conflicting"), nil), code: http.StatusUnprocessableEntity},
		{
			name: "widening fails", req: sidecarSetRequest(t, admissionv1.Create, next, nil), err: errors.New("conflict after 5 tries"),
			code: http.StatusServiceUnavailable, calls: []string{"new"}, message: "conflict after 5 tries",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &wideners{err: tt.err}
			resp := admit(t, &SidecarSetValidator{Snapshots: eng, Prefilter: w}, tt.req)
			require.NotNil(t, resp.Result)
			assert.Equal(t, tt.code, resp.Result.Code, resp.Result.Message)
			assert.Equal(t, tt.code == 200, resp.Allowed)
			assert.Equal(t, tt.calls, w.calls)
			assert.Contains(t, resp.Result.Message, tt.message)
		})
	}
}

// A v1alpha1 SidecarSet is validated as its hub form, but its errors name the fields written: a
// bad spec.namespace is reported as spec.namespace, not as the namespaceSelector it became.
func TestSidecarSetValidatorNamesV1alpha1Fields(t *testing.T) {
	req := sidecarSetRequest(t, admissionv1.Create, nil, nil)
	req.Kind.Version = "v1alpha1"
	req.Object.Raw = []byte(`{"apiVersion":"apps.kruise.io/v1alpha1","kind":"SidecarSet","metadata":{"name":"ns"},"spec":{"namespace":"not a namespace!","selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"agent","image":"agent:1"}]}}`)
	resp := admit(t, &SidecarSetValidator{Snapshots: validatorEngine(t)}, req)
	require.NotNil(t, resp.Result)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code, resp.Result.Message)
	require.NotNil(t, resp.Result.Details)
	require.NotEmpty(t, resp.Result.Details.Causes)
	for _, c := range resp.Result.Details.Causes {
		assert.Equal(t, "spec.namespace", c.Field, c.Message)
	}
	assert.Contains(t, resp.Result.Message, `spec.namespace: Invalid value: "not a namespace!"`)
}
