package migrate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func TestFlag(t *testing.T) {
	args := []string{"/manager", "--leader-elect", "-openkruise-kept=false", "--configuration-namespace", "kruise-system", "--namespace=ops", "--openkruise-kept", "notaflag"}
	assert.True(t, boolFlag(args, "openkruise-kept"), "the last one wins, as Go's flag package reads them")
	assert.False(t, boolFlag(args[:3], "openkruise-kept"))
	assert.True(t, boolFlag([]string{"--patch-metadata-defaults-allowed=true"}, "patch-metadata-defaults-allowed"))
	assert.False(t, boolFlag(args, "patch-metadata-defaults-allowed"))
	assert.Equal(t, "kruise-system", stringFlag(args, "configuration-namespace"))
	assert.Equal(t, "ops", stringFlag(args, "namespace"))
	assert.Empty(t, stringFlag(args, "revision-namespace"))
	assert.False(t, boolFlag([]string{"openkruise-kept"}, "openkruise-kept"), "an argument, not a flag")
}

// whitelistCM is kruise-configuration in ns with the whitelist value (none when value is "").
func whitelistCM(ns, value string) client.Object {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kruise-configuration"}, Data: map[string]string{"other": "x"}}
	if value != "" {
		cm.Data["SidecarSet_PatchPodMetadata_WhiteList"] = value
	}
	return cm
}

// patching is a SidecarSet that patches a pod annotation, which only a whitelist allows.
func patching(name string) client.Object {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:         &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Containers:       []v1beta1.SidecarContainer{{Container: corev1.Container{Name: name, Image: "example.com/" + name + ":1"}}},
			PatchPodMetadata: []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"logs.example.com/format": "json"}}},
		},
	}
}

// TestMigrateWhitelist: OpenKruise's whitelist is compared with the one the installed manager reads,
// and the SidecarSets are judged with the latter, as the manager will judge them.
func TestMigrateWhitelist(t *testing.T) {
	const allows = `{"rules":[{"allowedAnnotationKeyExprs":["^logs\\.example\\.com/"]}]}`
	const allowsNothing = `{"rules":[]}`
	leftBehind := "OpenKruise's patchPodMetadata whitelist (ConfigMap kruise-system/kruise-configuration, key SidecarSet_PatchPodMetadata_WhiteList) is not the one sidecarops' manager reads"
	refused := "SidecarSet logs would be refused by sidecarops"
	for _, tc := range []struct {
		name  string
		objs  []client.Object
		found string
		outcome
	}{
		{
			// OpenKruise refuses it alike: only its gate allows patches without a whitelist.
			name:    "neither has one",
			found:   "the patchPodMetadata whitelist: OpenKruise's none in kruise-system; sidecarops' manager reads none in sidecarops-system",
			outcome: outcome{warnings: []string{refused + ": spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found"}},
		},
		{
			name:  "left behind in kruise-system",
			objs:  []client.Object{whitelistCM("kruise-system", allows)},
			found: "the patchPodMetadata whitelist: OpenKruise's ConfigMap kruise-system/kruise-configuration; sidecarops' manager reads none in sidecarops-system",
			outcome: outcome{
				blockers: []string{leftBehind + " (in sidecarops-system: none)"},
				// Judged without it, as the manager would: the fix of the verdict judges it the same way.
				warnings: []string{refused + ": spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found"},
				fixes: []string{
					"--set whitelistNamespace=kruise-system",
					`kubectl -n sidecarops-system create configmap kruise-configuration --from-literal=SidecarSet_PatchPodMetadata_WhiteList="$(kubectl -n kruise-system get configmap kruise-configuration -o jsonpath='{.data.SidecarSet_PatchPodMetadata_WhiteList}')" --dry-run=client -o yaml | kubectl apply -f -`,
					"kubectl get sidecarset logs -o yaml > logs.yaml && sidecarctl check -f logs.yaml",
				},
			},
		},
		{
			name:  "copied",
			objs:  []client.Object{whitelistCM("kruise-system", allows), whitelistCM("sidecarops-system", allows)},
			found: "the patchPodMetadata whitelist: OpenKruise's ConfigMap kruise-system/kruise-configuration; sidecarops' manager reads ConfigMap sidecarops-system/kruise-configuration",
		},
		{
			name:    "read where OpenKruise keeps it",
			objs:    []client.Object{whitelistCM("kruise-system", allows), sidecaropsManager("--configuration-namespace=kruise-system")},
			found:   "the patchPodMetadata whitelist: OpenKruise's ConfigMap kruise-system/kruise-configuration; sidecarops' manager reads ConfigMap kruise-system/kruise-configuration",
			outcome: outcome{},
		},
		{
			name:  "another one",
			objs:  []client.Object{whitelistCM("kruise-system", allows), whitelistCM("sidecarops-system", allowsNothing)},
			found: "the patchPodMetadata whitelist: OpenKruise's ConfigMap kruise-system/kruise-configuration; sidecarops' manager reads ConfigMap sidecarops-system/kruise-configuration",
			outcome: outcome{
				blockers: []string{leftBehind + " (in sidecarops-system: another whitelist)"},
				warnings: []string{refused + ": spec.patchPodMetadata: Forbidden: sidecarSet patch metadata annotation is not allowed"},
				// Checked offline with the same whitelist.
				fixes: []string{"kubectl get sidecarset logs -o yaml > logs.yaml && kubectl -n sidecarops-system get configmap kruise-configuration -o yaml > kruise-configuration.yaml && sidecarctl check -f logs.yaml -f kruise-configuration.yaml"},
			},
		},
		{
			name:    "no whitelist, and the gate that allows patches without one",
			objs:    []client.Object{sidecaropsManager("--patch-metadata-defaults-allowed")},
			found:   "the patchPodMetadata whitelist: OpenKruise's none in kruise-system; sidecarops' manager reads none in sidecarops-system",
			outcome: outcome{},
		},
		{
			name:  "one that does not convert",
			objs:  []client.Object{whitelistCM("sidecarops-system", `{"rules": 1}`)},
			found: "the patchPodMetadata whitelist: OpenKruise's none in kruise-system; sidecarops' manager reads ConfigMap sidecarops-system/kruise-configuration",
			outcome: outcome{
				blockers: []string{"the whitelist sidecarops' manager reads does not convert, so it is refused: ConfigMap/kruise-configuration: data[SidecarSet_PatchPodMetadata_WhiteList].rules"},
				warnings: []string{refused + ": spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found"},
				fixes:    []string{"kubectl -n sidecarops-system edit configmap kruise-configuration"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := check(t, nil, all([]client.Object{sidecarSetKind.crd(true), patching("logs")}, tc.objs)...)
			assert.Contains(t, r.Found, tc.found)
			tc.check(t, r)
		})
	}
}
