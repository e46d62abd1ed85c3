package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/spf13/cobra"
	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/podcheck"
	"github.com/sidecarops/sidecarops/mutation"
)

func injectCmd() *cobra.Command {
	var (
		src       sourceFlags
		install   installFlags
		output    string
		patch     bool
		timestamp string
	)
	cmd := &cobra.Command{
		Use:   "inject -f PATH [-f PATH ...] [-o yaml|json] [--patch] [--timestamp RFC3339]",
		Short: "Print the workloads as the webhook would inject their pods",
		Long: "inject reads SidecarSets and workloads (Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob,\n" +
			"and OpenKruise's CloneSet, Advanced StatefulSet, Advanced DaemonSet, BroadcastJob) and prints the workloads,\n" +
			"in input order, with the sidecars injected into their pod templates; documents of kinds it does not read\n" +
			"are printed among them unchanged. With --patch it prints, per workload, the RFC 6902 patch the webhook\n" +
			"would answer for such a pod, its paths leading into the workload's pod template.\n\n" +
			"A document that does not decode, a SidecarSet a cluster would refuse and a workload whose pods it would\n" +
			"refuse are reported on stderr and left out; the rest is printed, injected with the SidecarSets a cluster\n" +
			"would have admitted, and the exit status is 1. A workload whose pods the injection makes fail the Pod\n" +
			"Security level their Namespace enforces (its pod-security.kubernetes.io/enforce labels, in the input or,\n" +
			"with --kubeconfig, the cluster) is warned about on stderr, as the webhook warns.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			now := time.Now
			if timestamp != "" {
				t, err := time.Parse(time.RFC3339, timestamp)
				if err != nil {
					return usageError{fmt.Errorf("--timestamp %q: not RFC3339: %w", timestamp, err)}
				}
				now = func() time.Time { return t }
			}
			others := "passed through unchanged"
			if patch {
				others = "ignored (no patch)"
			}
			w, err := src.input(cmd, others)
			if err != nil {
				return err
			}
			view, err := install.view(cmd.Context(), w.Namespaces, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			m := &mutation.Injector{Now: now, Rand: rand.Float64}
			var outObjs []runtime.Object
			var patches []workloadPatch
			for _, o := range w.Objects {
				if manifest.IsPassThrough(o.Obj) && !patch {
					outObjs = append(outObjs, o.Obj)
				}
				if !manifest.IsWorkload(o.Obj) {
					continue
				}
				pod, _ := manifest.PodTemplate(o.Obj, src.namespace)
				written := pod.DeepCopy()
				unseen, err := view.Unseen(cmd.Context(), pod.Namespace, pod)
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
					view.NoticeOnce()
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: not injected: %s\n", w.Name(o), unseen)
					if patch {
						patches = append(patches, newWorkloadPatch(o, pod.Namespace, nil))
					} else {
						outObjs = append(outObjs, o.Obj)
					}
					continue
				}
				res, err := injector.Pod(cmd.Context(), w.Snapshot, m, injector.PodRequest{Pod: pod})
				if err != nil {
					w.Fail(o, err) // a cluster would refuse its pods: there is nothing to print
					continue
				}
				if problems := podcheck.Problems(w, o, written, res.Pod, res.Injected); len(problems) > 0 {
					w.Problems = append(w.Problems, problems...) // so would the API server
					continue
				}
				enforced, err := view.Enforced(cmd.Context(), pod.Namespace)
				if err != nil {
					w.Fail(o, err)
					continue
				}
				if f := podcheck.PodSecurity(w, enforced, written, res); f != nil {
					w.Warn(findings.RulePodSecurity, o.Report("", f.String()))
				}
				for _, reason := range res.Denied {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: not injected: denied by gate: %s\n", w.Name(o), reason)
				}
				if patch {
					patches = append(patches, newWorkloadPatch(o, res.Namespace, res.Patch))
					continue
				}
				// A workload nothing is injected into is printed as it was read.
				if len(res.Patch) > 0 {
					if err := manifest.SetPodTemplate(o.Obj, res.Pod); err != nil {
						w.Fail(o, err)
						continue
					}
				}
				outObjs = append(outObjs, o.Obj)
			}
			if patch {
				err = printPatches(cmd, format, patches)
			} else {
				err = manifest.Encode(cmd.OutOrStdout(), format, outObjs...)
			}
			if err != nil {
				return err
			}
			return w.Err()
		},
	}
	src.register(cmd.Flags())
	install.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	cmd.Flags().BoolVar(&patch, "patch", false, "print the RFC 6902 patch per workload instead of the workloads")
	cmd.Flags().StringVar(&timestamp, "timestamp", "", "RFC3339 time to record in the sidecarset-hash annotations (default: now)")
	return cmd
}

func outputFormat(o string) (manifest.Format, error) {
	switch o {
	case "yaml", "":
		return manifest.YAML, nil
	case "json":
		return manifest.JSON, nil
	}
	return "", usageError{fmt.Errorf("-o %q: unsupported output format (yaml or json)", o)}
}

// workloadPatch is one entry of `inject --patch`: which workload, and the patch for its pods with
// paths into the workload (under its pod template; a Pod's are its own).
type workloadPatch struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Namespace  string                         `json:"namespace"`
	Name       string                         `json:"name"`
	Patch      []jsonpatch.JsonPatchOperation `json:"patch"`
}

func newWorkloadPatch(o *manifest.Object, ns string, podPatch []jsonpatch.JsonPatchOperation) workloadPatch {
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
	return workloadPatch{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: ns, Name: name, Patch: ops}
}

func printPatches(cmd *cobra.Command, format manifest.Format, patches []workloadPatch) error {
	out := cmd.OutOrStdout()
	if format == manifest.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "    ")
		if patches == nil {
			patches = []workloadPatch{}
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
