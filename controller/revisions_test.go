package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// Issue 35 item 2: a SidecarSet stored with a spec.customVersion that is no label value made
// every round fail on the API server's refusal of the revision's label, and retry. The revision
// is now registered without it, and the reason said in one Event, however many rounds run.
func TestRegisterRevisionWithACustomVersionThatIsNoLabelValue(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	// The API server's check of a write's labels, which the fake client does not make.
	labelsChecked := func(obj client.Object) error {
		if errs := metav1validation.ValidateLabels(obj.GetLabels(), field.NewPath("metadata", "labels")); len(errs) > 0 {
			return apierrors.NewInvalid(appsv1.SchemeGroupVersion.WithKind("ControllerRevision").GroupKind(), obj.GetName(), errs)
		}
		return nil
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := labelsChecked(obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := labelsChecked(obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, APIReader: c, Namespace: "ns", Recorder: rec}
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u"}, Spec: v1beta1.SidecarSetSpec{
		CustomVersion: "not a label value!",
		Containers:    []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "agent:1"}}},
	}}
	require.NoError(t, defaults.SidecarSetAndHash(ss))

	var names []string
	for range 3 {
		name, _, err := r.registerRevision(context.Background(), ss, nil)
		require.NoError(t, err)
		names = append(names, name)
	}
	assert.Equal(t, []string{names[0], names[0], names[0]}, names, "registered once, then reused")
	var cr appsv1.ControllerRevision
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: names[0]}, &cr))
	assert.NotContains(t, cr.Labels, v1beta1.SidecarSetCustomVersionLabel)
	require.Len(t, rec.Events, 1, "one Event for the three rounds")
	ev := <-rec.Events
	assert.Contains(t, ev, "Warning "+ReasonInvalidCustomVersion)
	assert.Contains(t, ev, `spec.customVersion "not a label value!" is no label value`)
}
