package check

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/installview"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
)

// WarnUnseen warns, for check, of what the installation keeps from the webhook: a SidecarSet scoped
// by name to namespaces it never sees, and a workload a SidecarSet matches in a namespace or with
// labels it never sees (its pods are created without that SidecarSet's sidecars).
func WarnUnseen(ctx context.Context, w *workspace.Workspace, v *installview.View, namespace string) error {
	for _, ss := range w.SidecarSets {
		names := namespacesByName(ss.Spec.NamespaceSelector)
		if len(names) == 0 {
			continue
		}
		var whys []string
		for _, ns := range names {
			why, err := v.NamespaceUnseen(ctx, ns)
			if err != nil {
				return err
			}
			if why == "" {
				break
			}
			whys = append(whys, why)
		}
		if len(whys) == len(names) {
			v.NoticeOnce()
			// Named as written: a v1alpha1 spec.namespace became this selector.
			at := w.Written[ss].Errors(field.ErrorList{field.Forbidden(field.NewPath("spec", "namespaceSelector"), "")})[0].Field
			w.Warn(findings.RuleWebhook, w.Origin[ss].Report(at, "injects nothing: "+strings.Join(whys, "; ")))
		}
	}
	for _, o := range w.Workloads {
		pod, _ := manifest.PodTemplate(o.Obj, namespace)
		why, err := v.Unseen(ctx, pod.Namespace, pod)
		if err != nil {
			return err
		}
		if why == "" {
			continue
		}
		raw, err := json.Marshal(pod)
		if err != nil {
			return err
		}
		reasons, err := w.Snapshot.Explain(ctx, pod.Namespace, raw)
		if err != nil {
			return err
		}
		var matching []string
		for name, r := range reasons {
			if slices.Equal(r, []string{"matches"}) {
				matching = append(matching, name)
			}
		}
		if len(matching) > 0 {
			slices.Sort(matching)
			v.NoticeOnce()
			w.Warn(findings.RuleWebhook, o.Report("", fmt.Sprintf("%s: created without the sidecars of %s, which match it", why, strings.Join(matching, ", "))))
		}
	}
	return nil
}

// namespacesByName are the namespaces a SidecarSet's namespaceSelector names when it selects by the
// name label alone (as spec.namespace converts), else none.
func namespacesByName(sel *metav1.LabelSelector) []string {
	switch {
	case sel == nil:
		return nil
	case len(sel.MatchLabels) == 1 && len(sel.MatchExpressions) == 0:
		if ns, ok := sel.MatchLabels[v1beta1.NamespaceNameLabel]; ok {
			return []string{ns}
		}
	case len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 1:
		if e := sel.MatchExpressions[0]; e.Key == v1beta1.NamespaceNameLabel && e.Operator == metav1.LabelSelectorOpIn {
			return e.Values
		}
	}
	return nil
}
