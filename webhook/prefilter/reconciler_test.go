package prefilter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// The cached registration keeps its managedFields even under a cache that strips them from every
// other object (the manager's): without them an administrator's object selector looks like the
// prefilter's own, which it replaces (test/install saw it replaced at a helm upgrade).
func TestCacheByObjectKeepsManagedFields(t *testing.T) {
	byObject := CacheByObject("sidecarops")
	require.Len(t, byObject, 1)
	for _, o := range byObject {
		require.NotNil(t, o.Transform, "nil would take the cache's default transform")
		cfg := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
			Name:          "sidecarops",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "helm", FieldsV1: metav1.NewFieldsV1(`{"f:webhooks":{"k:{\"name\":\"mpod.sidecarops.io\"}":{"f:objectSelector":{}}}}`)}},
		}}
		got, err := o.Transform(cfg.DeepCopy())
		require.NoError(t, err)
		assert.True(t, selectorOwnedByOthers(got.(*admissionregv1.MutatingWebhookConfiguration), "mpod.sidecarops.io"))
		stripped, err := cache.TransformStripManagedFields()(cfg.DeepCopy())
		require.NoError(t, err)
		assert.False(t, selectorOwnedByOthers(stripped.(*admissionregv1.MutatingWebhookConfiguration), "mpod.sidecarops.io"), "what the default transform would leave")
	}
}

// Only the pod webhook's own selector, owned by another manager, keeps the prefilter off it. A
// selector of another webhook of the same configuration, owned by whoever created it, once made
// the prefilter drop its selector, see none, and set it again, endlessly (Kubernetes 1.30 records
// the defaulted selectors for their creator).
func TestSelectorOwnedByOthers(t *testing.T) {
	const pod = `k:{\"name\":\"mpod.sidecarops.io\"}`
	const other = `k:{\"name\":\"msidecarset.sidecarops.io\"}`
	entry := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	cases := map[string]struct {
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		"no managed fields":                     {nil, false},
		"the pod webhook's, an administrator's": {[]metav1.ManagedFieldsEntry{entry("helm", `{"f:webhooks":{"`+pod+`":{"f:objectSelector":{}}}}`)}, true},
		"a selector's label, granular":          {[]metav1.ManagedFieldsEntry{entry("kubectl", `{"f:webhooks":{"`+pod+`":{"f:objectSelector":{"f:matchLabels":{"f:team":{}}}}}}`)}, true},
		"the pod webhook's, the prefilter's":    {[]metav1.ManagedFieldsEntry{entry(FieldOwner, `{"f:webhooks":{"`+pod+`":{"f:objectSelector":{}}}}`)}, false},
		"another webhook's selector":            {[]metav1.ManagedFieldsEntry{entry("e2e.test", `{"f:webhooks":{"`+other+`":{"f:objectSelector":{}},"`+pod+`":{"f:name":{}}}}`)}, false},
		"another field of the pod webhook":      {[]metav1.ManagedFieldsEntry{entry("helm", `{"f:webhooks":{"`+pod+`":{"f:namespaceSelector":{}}}}`)}, false},
		"unreadable fields":                     {[]metav1.ManagedFieldsEntry{entry("helm", `{"f:webhooks":[`)}, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{ManagedFields: c.entries}}
			assert.Equal(t, c.want, selectorOwnedByOthers(cfg, "mpod.sidecarops.io"))
		})
	}
}
