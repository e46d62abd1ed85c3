package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/installview"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/podcheck"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
	"github.com/sidecarops/sidecarops/mutation"
)

// Workloads writes to out, for every workload of w (or only the one named podName, when given) in
// namespace (when it names none), what each SidecarSet says of its pod, as view sees it. What
// cannot be explained of a workload is a problem of w. found says whether a workload was
// explained.
func Workloads(ctx context.Context, out io.Writer, w *workspace.Workspace, view *installview.View, namespace, podName string) (found bool) {
	for _, o := range w.Workloads {
		pod, _ := manifest.PodTemplate(o.Obj, namespace)
		name := o.Obj.(interface{ GetName() string }).GetName()
		if podName != "" && podName != name {
			continue
		}
		found = true
		raw, err := json.Marshal(pod)
		if err != nil {
			w.Fail(o, err)
			continue
		}
		reasons, err := w.Snapshot.Explain(ctx, pod.Namespace, raw)
		if err != nil {
			w.Fail(o, err)
			continue
		}
		unseen, err := view.Unseen(ctx, pod.Namespace, pod)
		if err != nil {
			w.Fail(o, err)
			continue
		}
		warning, err := podSecurityOf(ctx, w, view, unseen, pod)
		if err != nil {
			w.Fail(o, err)
			continue
		}
		fmt.Fprintf(out, "%s/%s (namespace %s):\n", o.Obj.GetObjectKind().GroupVersionKind().Kind, name, pod.Namespace)
		if unseen != "" {
			fmt.Fprintf(out, "  %s\n", unseen)
		}
		names := make([]string, 0, len(reasons))
		for n := range reasons {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) == 0 {
			fmt.Fprintln(out, "  no SidecarSets given")
		}
		for _, n := range names {
			why := strings.Join(reasons[n], "; ")
			if unseen != "" && why == "matches" {
				why = "matches, but the webhook does not see the pod"
			}
			fmt.Fprintf(out, "  %s: %s\n", n, why)
		}
		if warning != nil {
			fmt.Fprintf(out, "  warning: %s\n", warning)
		}
	}
	return found
}

// podSecurityOf is what the pod webhook would warn of pod, which it sees unless unseen says why
// not, once injected: nil unless its namespace enforces a Pod Security level. explain injects only
// for that.
func podSecurityOf(ctx context.Context, w *workspace.Workspace, view *installview.View, unseen string, pod *corev1.Pod) (*impact.PodFinding, error) {
	if unseen != "" {
		return nil, nil
	}
	enforced, err := view.Enforced(ctx, pod.Namespace)
	if err != nil || enforced == nil {
		return nil, err
	}
	res, err := injector.Pod(ctx, w.Snapshot, &mutation.Injector{Now: time.Now, Rand: rand.Float64}, injector.PodRequest{Pod: pod.DeepCopy()})
	if err != nil {
		return nil, err
	}
	return podcheck.PodSecurity(w, enforced, pod, res), nil
}
