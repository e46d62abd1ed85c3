package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// The two annotations that carry, through the other version, what one version holds and the other
// has no place for, so that a client of either version that reads a SidecarSet and replaces it
// writes back what is stored. OpenKruise's conversion keeps nothing of the kind (it drops these
// fields), so the names are sidecarops's own.
const (
	// V1alpha1FieldsAnnotation, on a v1beta1 SidecarSet converted from v1alpha1, holds as JSON the
	// v1alpha1 fields the conversion replaced: spec.namespace with the namespaceSelector written
	// beside it, and an empty custom-version label. It is read back only while the v1beta1 spec
	// still says what they became, and otherwise stays an ordinary annotation.
	V1alpha1FieldsAnnotation = "conversion.sidecarops.io/v1alpha1-fields"
	// V1beta1FieldsAnnotation, on a v1alpha1 SidecarSet converted from v1beta1, holds as JSON the
	// v1beta1 object's own custom-version label (in v1alpha1 that label is spec.customVersion), and
	// a spec.customVersion that is no label value.
	V1beta1FieldsAnnotation = "conversion.sidecarops.io/v1beta1-fields"
)

// ReplacedFields is the value of V1alpha1FieldsAnnotation.
// +kubebuilder:object:generate=false
type ReplacedFields struct {
	Namespace          string                `json:"namespace,omitempty"`
	NamespaceSelector  *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	CustomVersionLabel *string               `json:"customVersionLabel,omitempty"`
}

// v1beta1Fields is the value of V1beta1FieldsAnnotation.
// +kubebuilder:object:generate=false
type v1beta1Fields struct {
	CustomVersionLabel *string `json:"customVersionLabel,omitempty"`
	// CustomVersion is a spec.customVersion stored before it was validated as a label value: as
	// the label, the API server would refuse the converted object, and with it every v1alpha1 list.
	CustomVersion string `json:"customVersion,omitempty"`
}

// ConvertTo converts src to the hub version, as OpenKruise does: a non-empty spec.namespace
// becomes a namespaceSelector on the namespace's name label and replaces any namespaceSelector,
// and the custom-version label moves to spec.customVersion. What v1beta1 cannot hold goes to
// V1alpha1FieldsAnnotation; V1beta1FieldsAnnotation gives the v1beta1 object its own label back.
func (ss *SidecarSet) ConvertTo(hub conversion.Hub) error {
	src := ss
	dst, ok := hub.(*v1beta1.SidecarSet)
	if !ok {
		return fmt.Errorf("v1alpha1 SidecarSet converts to a v1beta1 SidecarSet, not %T", hub)
	}
	s := src.Spec.DeepCopy()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = v1beta1.SidecarSetSpec{
		Selector:             s.Selector,
		InitContainers:       s.InitContainers,
		Containers:           s.Containers,
		Volumes:              s.Volumes,
		UpdateStrategy:       s.UpdateStrategy,
		InjectionStrategy:    s.InjectionStrategy,
		ImagePullSecrets:     s.ImagePullSecrets,
		RevisionHistoryLimit: s.RevisionHistoryLimit,
		PatchPodMetadata:     s.PatchPodMetadata,
	}
	var own v1beta1Fields
	if raw, ok := dst.Annotations[V1beta1FieldsAnnotation]; ok {
		delete(dst.Annotations, V1beta1FieldsAnnotation)
		if json.Unmarshal([]byte(raw), &own) != nil {
			own = v1beta1Fields{}
		}
	}
	label, labelled := dst.Labels[SidecarSetCustomVersionLabel]
	if !labelled && own.CustomVersion != "" {
		label, labelled = own.CustomVersion, true
	}
	var kept string
	dst.Spec.NamespaceSelector, dst.Spec.CustomVersion, kept = toV1beta1(s.Namespace, s.NamespaceSelector, label, labelled)
	delete(dst.Labels, SidecarSetCustomVersionLabel)
	if kept != "" {
		metav1.SetMetaDataAnnotation(&dst.ObjectMeta, V1alpha1FieldsAnnotation, kept)
	}
	if own.CustomVersionLabel != nil {
		metav1.SetMetaDataLabel(&dst.ObjectMeta, SidecarSetCustomVersionLabel, *own.CustomVersionLabel)
	}
	dst.Status = *src.Status.DeepCopy()
	return nil
}

// ConvertFrom converts from the hub version: spec.customVersion becomes the custom-version label,
// the v1beta1 object's own label goes to V1beta1FieldsAnnotation, and V1alpha1FieldsAnnotation,
// while it still describes the spec, gives back the v1alpha1 fields it holds. Without it
// namespaceSelector is kept as it is, as OpenKruise does (no spec.namespace is recreated).
//
// The API server refuses a converted object whose labels or annotations it would refuse on a
// write, and with it the whole list or watch the object is in. A spec.customVersion that is no
// label value therefore goes to V1beta1FieldsAnnotation, where ConvertTo finds it again, and that
// annotation is left out when it would take the annotations past their size limit.
func (ss *SidecarSet) ConvertFrom(hub conversion.Hub) error {
	dst := ss
	src, ok := hub.(*v1beta1.SidecarSet)
	if !ok {
		return fmt.Errorf("v1alpha1 SidecarSet converts from a v1beta1 SidecarSet, not %T", hub)
	}
	s := src.Spec.DeepCopy()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = SidecarSetSpec{
		Selector:             s.Selector,
		NamespaceSelector:    s.NamespaceSelector,
		InitContainers:       s.InitContainers,
		Containers:           s.Containers,
		Volumes:              s.Volumes,
		UpdateStrategy:       s.UpdateStrategy,
		InjectionStrategy:    s.InjectionStrategy,
		ImagePullSecrets:     s.ImagePullSecrets,
		RevisionHistoryLimit: s.RevisionHistoryLimit,
		PatchPodMetadata:     s.PatchPodMetadata,
	}
	// The conversion never leaves this annotation on a v1beta1 object: one written there is not
	// the object's label and must not become it on the way back.
	delete(dst.Annotations, V1beta1FieldsAnnotation)
	var own v1beta1Fields
	if l, ok := dst.Labels[SidecarSetCustomVersionLabel]; ok {
		delete(dst.Labels, SidecarSetCustomVersionLabel)
		own.CustomVersionLabel = &l
	}
	label, labelled := s.CustomVersion, s.CustomVersion != ""
	if f, present, ignored := ReadReplacedFields(src); present && ignored == nil {
		delete(dst.Annotations, V1alpha1FieldsAnnotation)
		if f.Namespace != "" {
			dst.Spec.Namespace, dst.Spec.NamespaceSelector = f.Namespace, f.NamespaceSelector
		}
		if f.CustomVersionLabel != nil {
			label, labelled = *f.CustomVersionLabel, true
		}
	}
	if labelled && len(validation.IsValidLabelValue(label)) > 0 {
		own.CustomVersion, labelled = label, false
	}
	if labelled {
		metav1.SetMetaDataLabel(&dst.ObjectMeta, SidecarSetCustomVersionLabel, label)
	}
	if own != (v1beta1Fields{}) {
		metav1.SetMetaDataAnnotation(&dst.ObjectMeta, V1beta1FieldsAnnotation, mustMarshal(own))
		if apivalidation.ValidateAnnotationsSize(dst.Annotations) != nil {
			delete(dst.Annotations, V1beta1FieldsAnnotation)
		}
	}
	dst.Status = *src.Status.DeepCopy()
	return nil
}

// toV1beta1 is what the v1alpha1 fields v1beta1 lacks become: the namespaceSelector,
// spec.customVersion, and the value of V1alpha1FieldsAnnotation ("" when nothing is lost).
func toV1beta1(namespace string, selector *metav1.LabelSelector, label string, labelled bool) (*metav1.LabelSelector, string, string) {
	var lost ReplacedFields
	if namespace != "" {
		lost.Namespace, lost.NamespaceSelector = namespace, selector
		selector = v1beta1.NamespaceNamed(namespace)
	}
	if labelled && label == "" {
		lost.CustomVersionLabel = &label
	}
	if lost == (ReplacedFields{}) {
		return selector, label, ""
	}
	return selector, label, mustMarshal(lost)
}

// The reasons ReadReplacedFields gives for an annotation the conversion ignores.
var (
	errFieldsStale = errors.New("does not describe spec.namespaceSelector and spec.customVersion: " +
		"it is what the conversion from v1alpha1 keeps of the fields they were converted from")
	errFieldsSelector = errors.New("its namespaceSelector is no label selector")
)

// ReadReplacedFields reads hub's V1alpha1FieldsAnnotation (present is false when there is none)
// and says why ConvertFrom ignores it, if it does: it does not parse; it does not describe hub's
// spec, because converting what it holds does not give back that very spec and annotation (one left
// from before a v1beta1 client changed the spec, or written by hand); or the namespaceSelector it
// would give v1alpha1 readers is no selector.
func ReadReplacedFields(hub *v1beta1.SidecarSet) (f ReplacedFields, present bool, ignored error) {
	raw, present := hub.Annotations[V1alpha1FieldsAnnotation]
	if !present {
		return f, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &f); err != nil {
		return ReplacedFields{}, true, fmt.Errorf("not the JSON the conversion writes: %w", err)
	}
	spec := &hub.Spec
	selector := spec.NamespaceSelector
	if f.Namespace != "" {
		selector = f.NamespaceSelector
	}
	label, labelled := spec.CustomVersion, spec.CustomVersion != ""
	if f.CustomVersionLabel != nil {
		label, labelled = *f.CustomVersionLabel, true
	}
	gotSelector, gotVersion, gotRaw := toV1beta1(f.Namespace, selector, label, labelled)
	if gotRaw != raw || gotVersion != spec.CustomVersion || !apiequality.Semantic.DeepEqual(gotSelector, spec.NamespaceSelector) {
		return f, true, errFieldsStale
	}
	if f.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(f.NamespaceSelector); err != nil {
			return f, true, fmt.Errorf("%w: %w", errFieldsSelector, err)
		}
	}
	return f, true, nil
}

// mustMarshal encodes the annotation values above, which cannot fail to encode.
func mustMarshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
