package manifests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
	require.Len(t, objs, 2, "the policy and its binding")
	return objs
}

// The kruise-coexist sample is the takeover's installation (history in kruise-system) and the fence,
// with the manager's --openkruise-kept and its rights over OpenKruise's two webhook configurations,
// and without the SidecarSet CRD, which stays OpenKruise's.
func TestKruiseCoexistOverlay(t *testing.T) {
	objs := kustomize(t, "config/samples/kruise-coexist")
	takeover := kustomize(t, "config/samples/kruise-takeover")
	for k, u := range fence(t) {
		assert.Equal(t, "", u.GetNamespace(), "%s is cluster-scoped", k)
		delete(objs, k)
	}
	crd := "CustomResourceDefinition/sidecarsets.apps.kruise.io"
	require.Contains(t, takeover, crd)
	assert.NotContains(t, objs, crd, "the CRD stays OpenKruise's")
	delete(takeover, crd)
	deploy := "Deployment/sidecarops-system/sidecarops-manager"
	d := as[appsv1.Deployment](t, objs[deploy])
	args := d.Spec.Template.Spec.Containers[0].Args
	assert.Contains(t, args, "--revision-namespace=kruise-system")
	assert.Equal(t, "--openkruise-kept", args[len(args)-1])
	cr := "ClusterRole/sidecarops-manager"
	rules := as[rbacv1.ClusterRole](t, objs[cr]).Rules
	assert.Equal(t, rbacv1.PolicyRule{
		APIGroups:     []string{"admissionregistration.k8s.io"},
		Resources:     []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
		ResourceNames: []string{"kruise-mutating-webhook-configuration", "kruise-validating-webhook-configuration"},
		Verbs:         []string{"get", "update"},
	}, rules[len(rules)-1])
	// Apart from those two additions, the takeover's installation.
	kept := cut(t, objs[deploy].Object, "spec", "template", "spec", "containers", 0, "args").([]any)
	assert.Equal(t, cut(t, takeover[deploy].Object, "spec", "template", "spec", "containers", 0, "args"), kept[:len(kept)-1])
	assert.Equal(t, takeover[deploy], objs[deploy])
	delete(objs, deploy)
	delete(takeover, deploy)
	delete(objs, cr)
	delete(takeover, cr)
	assert.Equal(t, takeover, objs)
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
// openkruise.fence.serviceAccount.
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
