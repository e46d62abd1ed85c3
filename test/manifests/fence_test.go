package manifests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// kruiseManager is the username the openkruise-fence component names: OpenKruise's manager as its
// chart installs it.
const kruiseManager = "system:serviceaccount:kruise-system:kruise-manager"

// fence is the openkruise-fence component's objects, from the kruise-coexist sample.
func fence(t *testing.T) render.Objects {
	objs := render.Objects{}
	for k, u := range kustomize(t, "config/samples/kruise-coexist") {
		if strings.HasSuffix(u.GetKind(), "AdmissionPolicy") || strings.HasSuffix(u.GetKind(), "AdmissionPolicyBinding") {
			objs[k] = u
		}
	}
	require.Len(t, objs, 4, "two policies and their bindings")
	return objs
}

// The kruise-coexist sample is the takeover's installation (history in kruise-system) and the fence.
func TestKruiseCoexistOverlay(t *testing.T) {
	objs := kustomize(t, "config/samples/kruise-coexist")
	takeover := kustomize(t, "config/samples/kruise-takeover")
	for k, u := range fence(t) {
		assert.Equal(t, "", u.GetNamespace(), "%s is cluster-scoped", k)
		delete(objs, k)
	}
	assert.Equal(t, takeover, objs)
	d := as[appsv1.Deployment](t, objs["Deployment/sidecarops-system/sidecarops-manager"])
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--revision-namespace=kruise-system")
}

// The fence names every pod annotation OpenKruise's SidecarSet controller writes, as api/v1beta1
// lists them: one it left out would let that controller's writes through.
func TestFenceNamesEverySidecarSetAnnotation(t *testing.T) {
	vap := fence(t)["ValidatingAdmissionPolicy/sidecarops-openkruise-fence"]
	vars, _, err := unstructured.NestedSlice(vap.Object, "spec", "variables")
	require.NoError(t, err)
	var annotations string
	for _, v := range vars {
		if v := v.(map[string]any); v["name"] == "sidecarSetAnnotations" || v["name"] == "changedSidecarSetAnnotations" {
			annotations += v["expression"].(string)
		}
	}
	for _, a := range []string{
		v1beta1.SidecarSetHashAnnotation, v1beta1.SidecarSetHashWithoutImageAnnotation, v1beta1.SidecarSetListAnnotation,
		v1beta1.SidecarSetInplaceUpdateStateAnnotation, v1beta1.SidecarSetWorkingHotUpgradeContainer,
		v1beta1.SidecarSetVersionAnnotationPrefix, v1beta1.SidecarSetVersionAltAnnotationPrefix,
	} {
		assert.Contains(t, annotations, "'"+a+"'")
	}
}

// The chart's fence is off by default; on, it is the component's file as make generate copies it
// (no Helm labels, as the agent's policy), with OpenKruise's manager named by
// openkruise.fence.serviceAccount in both policies.
func TestChartFenceIsTheComponent(t *testing.T) {
	want := fence(t)
	for k := range want {
		assert.NotContains(t, chart(t, nil), k, "off by default")
	}
	for _, tc := range []struct {
		name   string
		values []string
		sets   []string
		user   string
	}{
		{"OpenKruise's chart's manager", nil, []string{"openkruise.fence.enabled=true"}, kruiseManager},
		{"another ServiceAccount", nil, []string{"openkruise.fence.enabled=true", "openkruise.fence.serviceAccount=openkruise/manager.v1"},
			"system:serviceaccount:openkruise:manager.v1"},
		{"full values", []string{fullValues}, nil, "system:serviceaccount:openkruise:kruise-manager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := chart(t, tc.values, tc.sets...)
			for k, u := range want {
				got := objs[k]
				if !assert.NotNil(t, got, k) {
					continue
				}
				if strings.HasSuffix(k, "Policy/"+u.GetName()) {
					conds, _, _ := unstructured.NestedSlice(got.Object, "spec", "matchConditions")
					require.NotEmpty(t, conds)
					assert.Equal(t, "request.userInfo.username == '"+tc.user+"'", conds[0].(map[string]any)["expression"], k)
					conds[0].(map[string]any)["expression"] = "request.userInfo.username == '" + kruiseManager + "'"
					require.NoError(t, unstructured.SetNestedSlice(got.Object, conds, "spec", "matchConditions"))
				}
				assert.Equal(t, u.Object, got.Object, "%s is the component's", k)
			}
		})
	}
}

// The ServiceAccount is a namespace and a name, as the chart splits it.
func TestChartFenceRejectsBadServiceAccount(t *testing.T) {
	for _, sa := range []string{"kruise-manager", "kruise-system/", "Kruise/manager", "a/b/c"} {
		_, err := render.Chart(t.TempDir(), chartDir, "sidecarops", namespace, nil,
			"openkruise.fence.enabled=true", "openkruise.fence.serviceAccount="+sa)
		if assert.Error(t, err, sa) {
			assert.Contains(t, err.Error(), "/openkruise/fence/serviceAccount", sa)
		}
	}
}
