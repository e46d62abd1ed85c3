package validation

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

// Fixtures restate the ones of OpenKruise's validating-webhook tests (compat §4.4): a SidecarSet
// "test-sidecarset" selecting a=b with one valid container test-sidecar/test-image, and the
// ControllerRevisions test-sidecarset-01234 and test-sidecarset-56789.

func base() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset"},
		Spec: v1beta1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			UpdateStrategy: v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.NotUpdateSidecarSetStrategyType},
			Containers:     []v1beta1.SidecarContainer{sidecar("test-sidecar")},
		},
	}
}

func sidecar(name string) v1beta1.SidecarContainer {
	return v1beta1.SidecarContainer{Container: corev1.Container{Name: name, Image: "test-image"}}
}

// rawSidecar is a container as OpenKruise's tests write it: every field the defaulting webhook
// would fill is filled by hand, so that the un-defaulted object is valid.
func rawSidecar(name string) v1beta1.SidecarContainer {
	return v1beta1.SidecarContainer{
		Container: corev1.Container{
			Name: name, Image: "test-image",
			ImagePullPolicy:          corev1.PullIfNotPresent,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		},
		PodInjectPolicy:   v1beta1.BeforeAppContainerType,
		UpgradeStrategy:   v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerColdUpgrade},
		ShareVolumePolicy: v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyDisabled},
	}
}

func testRevisions() history.Source {
	return history.NewStaticSource(
		&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset-01234"}},
		&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset-56789"}},
	)
}

// want is one expected error: its type and its field path.
type want struct {
	Type  field.ErrorType
	Field string
}

func (w want) String() string { return fmt.Sprintf("%s %s", w.Type, w.Field) }

func got(errs field.ErrorList) []want {
	out := make([]want, 0, len(errs))
	for _, e := range errs {
		out = append(out, want{e.Type, e.Field})
	}
	return out
}

func invalid(path string) want      { return want{field.ErrorTypeInvalid, path} }
func required(path string) want     { return want{field.ErrorTypeRequired, path} }
func forbidden(path string) want    { return want{field.ErrorTypeForbidden, path} }
func notFound(path string) want     { return want{field.ErrorTypeNotFound, path} }
func notSupported(path string) want { return want{field.ErrorTypeNotSupported, path} }
func duplicate(path string) want    { return want{field.ErrorTypeDuplicate, path} }

// validCase is a table row: mutate the base fixture, default it unless raw, validate, compare.
type validCase struct {
	name   string
	mutate func(ss *v1beta1.SidecarSet)
	raw    bool // skip defaulting (the case is about a value defaulting would fill)
	old    func() *v1beta1.SidecarSet
	others []*v1beta1.SidecarSet
	want   []want
	detail string // a substring of the first error's detail, when the message matters
}

func run(t *testing.T, cases []validCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ss := base()
			if tc.mutate != nil {
				tc.mutate(ss)
			}
			var old *v1beta1.SidecarSet
			if tc.old != nil {
				old = tc.old()
			}
			if !tc.raw {
				defaults.SidecarSet(ss)
				defaults.SidecarSet(old)
			}
			before := ss.DeepCopy()
			errs := SidecarSet(ss, old, testRevisions(), NewStaticLookup(tc.others...))
			assert.ElementsMatch(t, tc.want, got(errs), "errors: %v", errs)
			if tc.detail != "" && assert.NotEmpty(t, errs) {
				assert.Contains(t, errs[0].Detail, tc.detail)
			}
			assert.Equal(t, before, ss, "validation must not modify its input")
		})
	}
}
