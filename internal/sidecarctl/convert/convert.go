package convert

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
	"github.com/sidecarops/sidecarops/sidecarset/versions"
)

// Target is the SidecarSet version to, named alone (v1beta1) or with its group
// (apps.kruise.io/v1beta1).
func Target(to string) (schema.GroupVersion, error) {
	names := make([]string, 0, len(versions.Versions))
	for _, gv := range versions.Versions {
		if to == gv.Version || to == gv.String() {
			return gv, nil
		}
		names = append(names, gv.Version)
	}
	return schema.GroupVersion{}, fmt.Errorf("--to %q: unsupported SidecarSet version (%s)", to, strings.Join(names, " or "))
}

// Objects are the objects of w in input order, every SidecarSet in version to; one that cannot be
// converted is a problem of w and left out.
func Objects(w *workspace.Workspace, to schema.GroupVersion) []runtime.Object {
	out := make([]runtime.Object, 0, len(w.Objects))
	for _, o := range w.Objects {
		obj, err := object(o.Obj, to)
		if err != nil {
			w.Fail(o, err)
			continue
		}
		out = append(out, obj)
	}
	return out
}

// object returns obj, when it is a SidecarSet, in version to, converted as the API server
// converts it with the manager's conversion webhook; anything else as it is.
func object(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
	switch ss := obj.(type) {
	case *v1alpha1.SidecarSet:
		if to != v1beta1.GroupVersion {
			return ss, nil
		}
		written, err := versions.Of(ss)
		return written.Hub, err
	case *v1beta1.SidecarSet:
		if to != v1alpha1.GroupVersion {
			return ss, nil
		}
		alpha := &v1alpha1.SidecarSet{}
		return alpha, alpha.ConvertFrom(ss)
	}
	return obj, nil
}
