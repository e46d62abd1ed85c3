package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/installview"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/podcheck"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
	"github.com/sidecarops/sidecarops/mutation"
)

// Options say how to inject: the namespace of workloads that name none, the time the hash
// annotations record, which pods the installed webhook sees, where the notes of workloads left as
// written go, and whether the result is patches (--patch).
type Options struct {
	Namespace string
	Now       func() time.Time
	View      *installview.View
	Notes     io.Writer
	Patch     bool
}

// Result is the input injected. Objects (without Options.Patch) are the workloads, in input
// order, with the sidecars injected into their pod templates, among the documents of kinds
// sidecarctl does not read, which pass through unchanged; Patches (with it) the patch for each
// workload's pods.
type Result struct {
	Objects []runtime.Object
	Patches []Patch
}

// Workloads injects every workload of w. A workload a cluster would refuse the pods of (the
// injection fails, or the API server would refuse them) is a problem of w and left out; a workload
// the webhook never sees is printed as written, with a note; one a gate denies is printed as the
// injection leaves it, with a note; a Pod Security level the sidecars make it fail is a warning.
func Workloads(ctx context.Context, w *workspace.Workspace, opts Options) Result {
	m := &mutation.Injector{Now: opts.Now, Rand: rand.Float64}
	var res Result
	for _, o := range w.Objects {
		if manifest.IsPassThrough(o.Obj) && !opts.Patch {
			res.Objects = append(res.Objects, o.Obj)
		}
		if !manifest.IsWorkload(o.Obj) {
			continue
		}
		pod, _ := manifest.PodTemplate(o.Obj, opts.Namespace)
		written := pod.DeepCopy()
		unseen, err := opts.View.Unseen(ctx, pod.Namespace, pod)
		if err != nil {
			w.Fail(o, err)
			continue
		}
		if unseen != "" {
			// The API server creates its pods as written, without calling the webhook.
			if problems := podcheck.Problems(w, o, written, written, nil); len(problems) > 0 {
				w.Problems = append(w.Problems, problems...)
				continue
			}
			opts.View.NoticeOnce()
			fmt.Fprintf(opts.Notes, "%s: not injected: %s\n", w.Name(o), unseen)
			if opts.Patch {
				res.Patches = append(res.Patches, newPatch(o, pod.Namespace, nil))
			} else {
				res.Objects = append(res.Objects, o.Obj)
			}
			continue
		}
		injected, err := injector.Pod(ctx, w.Snapshot, m, injector.PodRequest{Pod: pod})
		if err != nil {
			w.Fail(o, err) // a cluster would refuse its pods: there is nothing to print
			continue
		}
		if problems := podcheck.Problems(w, o, written, injected.Pod, injected.Injected); len(problems) > 0 {
			w.Problems = append(w.Problems, problems...) // so would the API server
			continue
		}
		enforced, err := opts.View.Enforced(ctx, pod.Namespace)
		if err != nil {
			w.Fail(o, err)
			continue
		}
		if f := podcheck.PodSecurity(w, enforced, written, injected); f != nil {
			w.Warn(findings.RulePodSecurity, o.Report("", f.String()))
		}
		for _, reason := range injected.Denied {
			fmt.Fprintf(opts.Notes, "%s: not injected: denied by gate: %s\n", w.Name(o), reason)
		}
		if opts.Patch {
			res.Patches = append(res.Patches, newPatch(o, injected.Namespace, injected.Patch))
			continue
		}
		// A workload nothing is injected into is printed as it was read.
		if len(injected.Patch) > 0 {
			if err := manifest.SetPodTemplate(o.Obj, injected.Pod); err != nil {
				w.Fail(o, err)
				continue
			}
		}
		res.Objects = append(res.Objects, o.Obj)
	}
	return res
}

// Patch is one entry of `inject --patch`: which workload, and the patch for its pods with paths
// into the workload (under its pod template; a Pod's are its own).
type Patch struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Namespace  string                         `json:"namespace"`
	Name       string                         `json:"name"`
	Patch      []jsonpatch.JsonPatchOperation `json:"patch"`
}

func newPatch(o *manifest.Object, ns string, podPatch []jsonpatch.JsonPatchOperation) Patch {
	gvk := o.Obj.GetObjectKind().GroupVersionKind()
	name := ""
	if m, ok := o.Obj.(interface{ GetName() string }); ok {
		name = m.GetName()
	}
	template, _ := manifest.PodTemplatePointer(o.Obj)
	ops := make([]jsonpatch.JsonPatchOperation, len(podPatch))
	for i, op := range podPatch {
		op.Path = template + op.Path
		ops[i] = op
	}
	return Patch{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: ns, Name: name, Patch: ops}
}

// WritePatches prints patches in format: one JSON array, or YAML documents.
func WritePatches(out io.Writer, format manifest.Format, patches []Patch) error {
	if format == manifest.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "    ")
		if patches == nil {
			patches = []Patch{}
		}
		return enc.Encode(patches)
	}
	for i, p := range patches {
		raw, err := yaml.Marshal(p)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(out, "---")
		}
		if _, err := out.Write(raw); err != nil {
			return err
		}
	}
	return nil
}
