package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/internal/testing/kwok"
	"github.com/sidecarops/sidecarops/manager"
	"github.com/sidecarops/sidecarops/webhook/prefilter"
)

// exampleDirs are applied in this order; examples/policies and examples/whitelist-bundle are the
// administrators' bundles the manager loads.
var exampleDirs = []string{"examples/namespace-selector", "examples/logging", "examples/envoy-hotupgrade", "examples/patch-metadata"}

func main() {
	once := flag.Bool("once", false, "run through the demo and exit (CI)")
	root := flag.String("root", ".", "repository root")
	verbose := flag.Bool("v", false, "show the manager's logs")
	flag.Parse()
	logOut := io.Discard
	if *verbose {
		logOut = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logOut)))
	if err := run(*root, *once, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(root string, once bool, out io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	step(out, "starting etcd, kube-apiserver and the sidecarops manager")
	c, err := devcluster.Start(ctx, devcluster.Options{Root: root, Manager: manager.Options{
		Bundles:            []string{filepath.Join(root, "examples", "policies"), filepath.Join(root, "examples", "whitelist-bundle")},
		BundlePollInterval: time.Second,
		DecisionLog:        true,
	}})
	if err != nil {
		return err
	}
	defer func() {
		step(out, "stopping")
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping:", err)
		}
	}()

	step(out, "starting kwok as the kubelet of a fake node, so the pods run")
	kw, err := kwok.Start(ctx, kwok.Options{KubeconfigPath: c.Kubeconfig})
	if err != nil {
		return err
	}
	defer func() {
		if err := kw.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping kwok:", err)
		}
	}()

	var paths []string
	for _, d := range exampleDirs {
		paths = append(paths, filepath.Join(root, d))
	}
	objs, err := manifest.Read(nil, paths...)
	if err != nil {
		return err
	}
	step(out, "applying %s", strings.Join(exampleDirs, ", "))
	pods, err := apply(ctx, out, c.Client, objs)
	if err != nil {
		return err
	}
	for _, p := range pods {
		p.Spec.NodeName = kw.Node // no scheduler runs: bind the pods to kwok's node directly
	}
	step(out, "creating one pod per example workload (the webhook injects it)")
	created, err := createPods(ctx, c.Client, pods)
	if err != nil {
		return err
	}
	step(out, "waiting for the pods to run")
	for i, p := range created {
		if created[i], err = waitRunning(ctx, c.Client, p); err != nil {
			return err
		}
	}
	for _, p := range created {
		if err := printPod(out, p); err != nil {
			return err
		}
	}
	step(out, "kubectl get sidecarsets, once the controller has counted the pods above")
	if err := waitCounted(ctx, out, c.Client, created); err != nil {
		return err
	}
	if err := printSidecarSets(ctx, out, c.Client); err != nil {
		return err
	}
	step(out, "the pod webhook's filter: the API server calls the webhook only for pods it lets through")
	if err := printPrefilter(ctx, out, c.Client); err != nil {
		return err
	}
	step(out, "rolling out logging-agent's new image %s: the sidecar is upgraded in place, the pod stays", rolloutImage)
	if err := rollout(ctx, out, c.Client, "logging-agent", rolloutImage); err != nil {
		return err
	}
	step(out, "kubectl get sidecarsets")
	if err := printSidecarSets(ctx, out, c.Client); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nThe cluster is yours while this runs:\n  export KUBECONFIG=%s\n  kubectl get pods -A\n  kubectl get sidecarsets\n", c.Kubeconfig)
	if once {
		return nil
	}
	fmt.Fprintln(out, "\nPress Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}

func step(out io.Writer, format string, args ...any) {
	fmt.Fprintf(out, "\n==> "+format+"\n", args...)
}

// apply creates Namespaces, then SidecarSets in the version each example is written in, and returns
// the pods the workloads would create: the demo's API server runs no controllers, so nothing turns
// a Deployment into pods by itself.
func apply(ctx context.Context, out io.Writer, cl client.Client, objs []*manifest.Object) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	namespaces := map[string]bool{}
	for _, o := range objs {
		if ns, ok := o.Obj.(*corev1.Namespace); ok {
			if err := create(ctx, cl, ns); err != nil {
				return nil, fmt.Errorf("%s: %w", o, err)
			}
			namespaces[ns.Name] = true
		}
	}
	for _, o := range objs {
		switch ss := o.Obj.(type) {
		case *v1alpha1.SidecarSet, *v1beta1.SidecarSet:
			obj := ss.(client.Object)
			gvk := obj.GetObjectKind().GroupVersionKind()
			if err := create(ctx, cl, obj); err != nil {
				return nil, fmt.Errorf("%s: %w", o, err)
			}
			fmt.Fprintf(out, "SidecarSet %s created as %s\n", obj.GetName(), gvk.GroupVersion())
		}
	}
	for _, o := range objs {
		p, ok := manifest.PodTemplate(o.Obj, "default")
		if !ok {
			continue
		}
		if p.Name == "" {
			p.Name = o.Obj.(client.Object).GetName() + "-demo"
		}
		if !namespaces[p.Namespace] && p.Namespace != "default" {
			if err := create(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}); err != nil {
				return nil, err
			}
			namespaces[p.Namespace] = true
		}
		pods = append(pods, p)
	}
	return pods, nil
}

func create(ctx context.Context, cl client.Client, obj client.Object) error {
	err := cl.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// createPods creates each pod and returns them as stored. The SidecarSets were applied a moment
// ago and the manager compiles them after a short debounce, so it first probes with dry-run creates
// until a pod comes back injected; after that, a pod that still is not (sandbox/scratch matches
// nothing) gets a few more seconds, the loader's longest compile delay.
func createPods(ctx context.Context, cl client.Client, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	deadline := time.Now().Add(30 * time.Second)
	settled := false
	for _, p := range pods {
		for {
			probe := p.DeepCopy()
			if err := cl.Create(ctx, probe, client.DryRunAll); err != nil {
				return nil, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			if probe.Annotations[v1beta1.SidecarSetListAnnotation] != "" {
				if !settled {
					settled, deadline = true, time.Now().Add(3*time.Second)
				}
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if err := cl.Create(ctx, p); err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		var stored corev1.Pod
		if err := cl.Get(ctx, client.ObjectKeyFromObject(p), &stored); err != nil {
			return nil, err
		}
		out = append(out, &stored)
	}
	return out, nil
}

// waitRunning polls until kwok has started the pod (bounded), and returns it as stored.
func waitRunning(ctx context.Context, cl client.Client, p *corev1.Pod) (*corev1.Pod, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var cur corev1.Pod
		if err := cl.Get(ctx, client.ObjectKeyFromObject(p), &cur); err != nil {
			return nil, err
		}
		if cur.Status.Phase == corev1.PodRunning || time.Now().After(deadline) {
			return &cur, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func printPod(out io.Writer, p *corev1.Pod) error {
	injected := strconv.Quote(p.Annotations[v1beta1.SidecarSetListAnnotation])
	if p.Annotations[v1beta1.SidecarSetListAnnotation] == "" {
		injected = "none: no SidecarSet selects it, so the pod webhook's filter (below) kept the API server from sending it"
	}
	fmt.Fprintf(out, "\npod %s/%s — %s, injected: %s\n", p.Namespace, p.Name, p.Status.Phase, injected)
	show := func(kind string, cs []corev1.Container) {
		for _, c := range cs {
			fmt.Fprintf(out, "  %-15s %-28s %s\n", kind, c.Name, c.Image)
		}
	}
	show("initContainer", p.Spec.InitContainers)
	show("container", p.Spec.Containers)
	keys := make([]string, 0, len(p.Annotations))
	for k := range p.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := p.Annotations[k]
		if len(v) > 100 {
			v = v[:97] + "..."
		}
		fmt.Fprintf(out, "  annotation      %s: %s\n", k, v)
	}
	return nil
}

// printPrefilter prints the filter package prefilter keeps on the pod webhook.
func printPrefilter(ctx context.Context, out io.Writer, cl client.Client) error {
	var cfg admissionregv1.MutatingWebhookConfiguration
	if err := cl.Get(ctx, client.ObjectKey{Name: manager.WebhookConfigurationName}, &cfg); err != nil {
		return err
	}
	f, _ := prefilter.Registered(&cfg, manager.PodWebhookName)
	switch {
	case !f.Filtered():
		_, err := fmt.Fprintln(out, "(none yet: every pod is sent to the webhook)")
		return err
	case f.Selector != nil:
		fmt.Fprintf(out, "  objectSelector  %s\n", metav1.FormatLabelSelector(f.Selector))
	}
	condition := f.Expression
	if condition == "" {
		condition = "(none: the object selector says it all, and costs the API server less)"
	}
	_, err := fmt.Fprintf(out, "  matchCondition  %s\n", condition)
	return err
}

// waitCounted waits until every SidecarSet's status counts, as matched and ready, the pods of pods
// it was injected into, so that the table printed next agrees with the pods printed before it; past
// a deadline it says which status has not caught up and goes on.
func waitCounted(ctx context.Context, out io.Writer, cl client.Client, pods []*corev1.Pod) error {
	want := map[string]int32{}
	for _, p := range pods {
		for name := range strings.SplitSeq(p.Annotations[v1beta1.SidecarSetListAnnotation], ",") {
			if name != "" {
				want[name]++
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var list v1beta1.SidecarSetList
		if err := cl.List(ctx, &list); err != nil {
			return err
		}
		var behind []string
		for _, ss := range list.Items {
			st := ss.Status
			if st.ObservedGeneration != ss.Generation || st.MatchedPods != want[ss.Name] || st.ReadyPods != want[ss.Name] {
				behind = append(behind, fmt.Sprintf("%s (matched %d, ready %d of %d)", ss.Name, st.MatchedPods, st.ReadyPods, want[ss.Name]))
			}
		}
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(out, "the status has not caught up yet: %s\n", strings.Join(behind, ", "))
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func printSidecarSets(ctx context.Context, out io.Writer, cl client.Client) error {
	var list v1beta1.SidecarSetList
	if err := cl.List(ctx, &list); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAME\tMATCHED\tUPDATED\tREADY\tUPDATED-READY\tAGE")
	for _, ss := range list.Items {
		age := duration.HumanDuration(time.Since(ss.CreationTimestamp.Time))
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\n", ss.Name, ss.Status.MatchedPods, ss.Status.UpdatedPods, ss.Status.ReadyPods, ss.Status.UpdatedReadyPods, age)
	}
	return w.Flush()
}

// rolloutImage is the logging agent's next version in the demo's rollout.
const rolloutImage = "fluent/fluent-bit:3.3"

// rollout changes the first sidecar image of SidecarSet name, waits until the controller has
// upgraded every pod it manages and kwok reports them running it, and prints each pod's sidecar
// before and after: same pod (UID), new image, one in-place restart.
func rollout(ctx context.Context, out io.Writer, cl client.Client, name, image string) error {
	ss := &v1beta1.SidecarSet{}
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, ss); err != nil {
		return err
	}
	sidecar := ss.Spec.Containers[0].Name
	var before corev1.PodList
	if err := cl.List(ctx, &before); err != nil {
		return err
	}
	ss.Spec.Containers[0].Image = image
	if err := cl.Update(ctx, ss); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, ss); err != nil {
			return err
		}
		st := ss.Status
		if st.ObservedGeneration == ss.Generation && st.UpdatedPods == st.MatchedPods && st.UpdatedReadyPods == st.MatchedPods {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: rollout of %s not done after a minute: status %+v", name, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, old := range before.Items {
		var p corev1.Pod
		if err := cl.Get(ctx, client.ObjectKeyFromObject(&old), &p); err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != sidecar || !strings.Contains(p.Annotations[v1beta1.SidecarSetListAnnotation], name) {
				continue
			}
			same := "same pod"
			if p.UID != old.UID {
				same = "a new pod"
			}
			fmt.Fprintf(out, "  pod %s/%s (%s): %s %s -> %s, restarts %d\n", p.Namespace, p.Name, same, sidecar, statusImage(&old, sidecar), cs.Image, cs.RestartCount)
		}
	}
	return nil
}

func statusImage(p *corev1.Pod, name string) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return cs.Image
		}
	}
	return ""
}
