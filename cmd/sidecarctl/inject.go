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
	"github.com/sidecarops/sidecarops/mutation"
)

func injectCmd() *cobra.Command {
	var (
		src       sourceFlags
		output    string
		patch     bool
		timestamp string
	)
	cmd := &cobra.Command{
		Use:   "inject -f PATH [-f PATH ...] [-o yaml|json] [--patch] [--timestamp RFC3339]",
		Short: "Print the workloads as the webhook would inject their pods",
		Long: "inject reads SidecarSets and workloads (Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob)\n" +
			"and prints only the workloads, in input order, with the sidecars injected into their pod templates.\n" +
			"With --patch it prints, per workload, the RFC 6902 patch the webhook would answer for such a pod.",
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
					return fmt.Errorf("--timestamp %q: not RFC3339: %w", timestamp, err)
				}
				now = func() time.Time { return t }
			}
			w, err := src.load(cmd.Context(), cmd.InOrStdin())
			if err != nil {
				return err
			}
			m := &mutation.Injector{Now: now, Rand: rand.Float64}
			var outObjs []runtime.Object
			var patches []workloadPatch
			for _, o := range w.workloads {
				pod, _ := manifest.PodTemplate(o.Obj, src.namespace)
				res, err := injector.Pod(cmd.Context(), w.snapshot, m, injector.PodRequest{Pod: pod})
				if err != nil {
					return fmt.Errorf("%s: %w", o, err)
				}
				for _, reason := range res.Denied {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: not injected: denied by gate: %s\n", o, reason)
				}
				if patch {
					patches = append(patches, newWorkloadPatch(o, res.Namespace, res.Patch))
					continue
				}
				if err := manifest.SetPodTemplate(o.Obj, res.Pod); err != nil {
					return fmt.Errorf("%s: %w", o, err)
				}
				outObjs = append(outObjs, o.Obj)
			}
			if patch {
				return printPatches(cmd, format, patches)
			}
			return manifest.Encode(cmd.OutOrStdout(), format, outObjs...)
		},
	}
	src.register(cmd.Flags())
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
	return "", fmt.Errorf("-o %q: unsupported output format (yaml or json)", o)
}

// workloadPatch is one entry of `inject --patch`: which workload, and the patch for its pods.
type workloadPatch struct {
	Kind      string                         `json:"kind"`
	Namespace string                         `json:"namespace"`
	Name      string                         `json:"name"`
	Patch     []jsonpatch.JsonPatchOperation `json:"patch"`
}

func newWorkloadPatch(o *manifest.Object, ns string, ops []jsonpatch.JsonPatchOperation) workloadPatch {
	gvk := o.Obj.GetObjectKind().GroupVersionKind()
	name := ""
	if m, ok := o.Obj.(interface{ GetName() string }); ok {
		name = m.GetName()
	}
	if ops == nil {
		ops = []jsonpatch.JsonPatchOperation{}
	}
	return workloadPatch{Kind: gvk.Kind, Namespace: ns, Name: name, Patch: ops}
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
