package versions

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Written is a SidecarSet as a client wrote it: Hub is its hub form, which the rest of sidecarops
// reads and may change (defaulting); Alpha is the original when it was written as v1alpha1.
type Written struct {
	Hub   *v1beta1.SidecarSet
	Alpha *v1alpha1.SidecarSet
}

// Versions are the SidecarSet versions a client may write, the hub last.
var Versions = []schema.GroupVersion{v1alpha1.GroupVersion, v1beta1.GroupVersion}

// New returns an empty SidecarSet of version, to decode into, and Of turns it into a Written.
func New(version string) (runtime.Object, error) {
	switch version {
	case v1alpha1.GroupVersion.Version:
		return &v1alpha1.SidecarSet{}, nil
	case v1beta1.GroupVersion.Version:
		return &v1beta1.SidecarSet{}, nil
	}
	return nil, fmt.Errorf("unsupported version %q of SidecarSet.%s (served: %s, %s)", version, v1beta1.GroupVersion.Group,
		v1alpha1.GroupVersion.Version, v1beta1.GroupVersion.Version)
}

// Of is a decoded SidecarSet of either version as Written.
func Of(obj runtime.Object) (Written, error) {
	switch ss := obj.(type) {
	case *v1beta1.SidecarSet:
		return Written{Hub: ss}, nil
	case *v1alpha1.SidecarSet:
		hub := &v1beta1.SidecarSet{}
		if err := ss.ConvertTo(hub); err != nil {
			return Written{}, err
		}
		hub.TypeMeta = metaOf(ss.TypeMeta, v1beta1.GroupVersion)
		return Written{Hub: hub, Alpha: ss}, nil
	}
	return Written{}, fmt.Errorf("not a SidecarSet: %T", obj)
}

// Object is the SidecarSet in the version it was written, with the hub's changes. A v1alpha1
// keeps its namespace scope as written whatever became of the hub's annotations: the conversion
// brings spec.namespace back from one of them, and defaulting never changes the scope.
func (w Written) Object() (runtime.Object, error) {
	if w.Alpha == nil {
		return w.Hub, nil
	}
	out := &v1alpha1.SidecarSet{}
	if err := out.ConvertFrom(w.Hub); err != nil {
		return nil, err
	}
	out.TypeMeta = w.Alpha.TypeMeta
	out.Spec.Namespace, out.Spec.NamespaceSelector = w.Alpha.Spec.Namespace, w.Alpha.Spec.NamespaceSelector.DeepCopy()
	// So is its custom-version label, which defaulting never changes either: one that is no label
	// value would move to an annotation, and the API server would never say what is wrong with it.
	asWritten(&out.Labels, w.Alpha.Labels, v1alpha1.SidecarSetCustomVersionLabel)
	asWritten(&out.Annotations, w.Alpha.Annotations, v1alpha1.V1beta1FieldsAnnotation)
	return out, nil
}

// asWritten sets key in *m as it is in written: the same value, or absent.
func asWritten(m *map[string]string, written map[string]string, key string) {
	v, ok := written[key]
	switch {
	case ok && *m == nil:
		*m = map[string]string{key: v}
	case ok:
		(*m)[key] = v
	default:
		delete(*m, key)
	}
}

// carriedSelector is where validation reports the namespaceSelector V1alpha1FieldsAnnotation
// carries: a v1alpha1 client wrote it as spec.namespaceSelector, beside spec.namespace.
var carriedSelector = field.NewPath("metadata", "annotations").Key(v1alpha1.V1alpha1FieldsAnnotation).Child("namespaceSelector").String()

// Errors names errs by the fields written as v1alpha1: the namespaceSelector a spec.namespace
// became is reported as spec.namespace, with the value written, once (the selector's several
// checks say the same thing about one string); the namespaceSelector written beside it, which the
// conversion keeps in an annotation, as spec.namespaceSelector; and spec.customVersion as the
// custom-version label it was written as, or the annotation that holds one that is no label value.
func (w Written) Errors(errs field.ErrorList) field.ErrorList {
	if w.Alpha == nil {
		return errs
	}
	scoped := w.Alpha.Spec.Namespace != ""
	out := make(field.ErrorList, 0, len(errs))
	named := false
	for _, e := range errs {
		switch {
		case scoped && under(e.Field, carriedSelector):
			c := *e
			c.Field = "spec.namespaceSelector" + strings.TrimPrefix(e.Field, carriedSelector)
			e = &c
		case scoped && under(e.Field, "spec.namespaceSelector"):
			if named {
				continue
			}
			named = true
			c := *e
			c.Field, c.BadValue = "spec.namespace", w.Alpha.Spec.Namespace
			e = &c
		case e.Field == "spec.customVersion":
			c := *e
			c.Field = field.NewPath("metadata", "annotations").Key(v1alpha1.V1beta1FieldsAnnotation).String()
			if _, ok := w.Alpha.Labels[v1alpha1.SidecarSetCustomVersionLabel]; ok {
				c.Field = field.NewPath("metadata", "labels").Key(v1alpha1.SidecarSetCustomVersionLabel).String()
			}
			e = &c
		}
		out = append(out, e)
	}
	return out
}

// under says whether path is prefix or a field in it.
func under(path, prefix string) bool {
	rest, ok := strings.CutPrefix(path, prefix)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

func metaOf(tm metav1.TypeMeta, gv schema.GroupVersion) metav1.TypeMeta {
	if tm.APIVersion == "" && tm.Kind == "" {
		return tm
	}
	return metav1.TypeMeta{APIVersion: gv.String(), Kind: "SidecarSet"}
}
