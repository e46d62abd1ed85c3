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
		assert.True(t, selectorOwnedByOthers(got.(*admissionregv1.MutatingWebhookConfiguration)))
		stripped, err := cache.TransformStripManagedFields()(cfg.DeepCopy())
		require.NoError(t, err)
		assert.False(t, selectorOwnedByOthers(stripped.(*admissionregv1.MutatingWebhookConfiguration)), "what the default transform would leave")
	}
}
