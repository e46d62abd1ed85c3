package manifests

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// What the chart installs on each migration path (docs/migration.md): on path A (and a fresh
// install) the SidecarSet CRD, its conversion served by the manager; next to a kept OpenKruise
// (path B) no CRD, which stays OpenKruise's with its conversion, the manager's --openkruise-kept
// and the rights it needs over OpenKruise's two webhook configurations; the whitelist read where
// whitelistNamespace says, with the rights to read it there.
func TestChartPerMigrationPath(t *testing.T) {
	crd := "CustomResourceDefinition/sidecarsets.apps.kruise.io"
	kruiseConfigurations := []string{"kruise-mutating-webhook-configuration", "kruise-validating-webhook-configuration"}
	for _, tc := range []struct {
		name       string
		sets       []string
		crd        bool
		args       []string
		kruiseRule bool
		configRole bool
	}{
		{name: "a fresh install", crd: true},
		{name: "path A: OpenKruise stopped, its history and whitelist read where it left them",
			sets: []string{"revisionNamespace=kruise-system", "whitelistNamespace=kruise-system"}, crd: true,
			args: []string{"--configuration-namespace=kruise-system", "--revision-namespace=kruise-system"}, configRole: true},
		{name: "path B: OpenKruise kept, its pod webhook and CRD with it",
			sets:       []string{"revisionNamespace=kruise-system", "whitelistNamespace=kruise-system", "openkruise.fence.enabled=true"},
			args:       []string{"--openkruise-kept", "--configuration-namespace=kruise-system", "--revision-namespace=kruise-system"},
			kruiseRule: true, configRole: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := chart(t, nil, tc.sets...)
			_, hasCRD := objs[crd]
			assert.Equal(t, tc.crd, hasCRD, "the SidecarSet CRD")
			d := as[appsv1.Deployment](t, objs["Deployment/"+namespace+"/sidecarops-manager"])
			var args []string
			for _, a := range d.Spec.Template.Spec.Containers[0].Args {
				for _, want := range []string{"--openkruise-kept", "--configuration-namespace=kruise-system", "--revision-namespace=kruise-system"} {
					if a == want {
						args = append(args, a)
					}
				}
			}
			assert.Equal(t, tc.args, args)
			cr := as[rbacv1.ClusterRole](t, objs["ClusterRole/sidecarops-manager"])
			var kruiseRule bool
			for _, r := range cr.Rules {
				if assert.ObjectsAreEqual(kruiseConfigurations, r.ResourceNames) {
					kruiseRule = true
					assert.ElementsMatch(t, []string{"get", "update"}, r.Verbs)
				}
			}
			assert.Equal(t, tc.kruiseRule, kruiseRule, "the rights over OpenKruise's webhook configurations")
			role, ok := objs["Role/kruise-system/sidecarops-manager-configuration"]
			assert.Equal(t, tc.configRole, ok, "the Role reading ConfigMaps in kruise-system")
			if ok {
				r := as[rbacv1.Role](t, role)
				require.Len(t, r.Rules, 1)
				assert.Equal(t, []string{"configmaps"}, r.Rules[0].Resources)
				assert.Equal(t, []string{"get", "list", "watch"}, r.Rules[0].Verbs)
			}
		})
	}
	// A whitelist in the values would be written where the manager does not read it.
	_, err := render.Chart(t.TempDir(), chartDir, "sidecarops", namespace, nil,
		"whitelistNamespace=kruise-system", "patchPodMetadataWhiteList.rules[0].allowedAnnotationKeyExprs[0]=x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the manager reads the whitelist in kruise-system")
}
