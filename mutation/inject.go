package mutation

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/history"
	"github.com/sidecarops/sidecarops/sidecarset/resourcespolicy"
)

// Injector injects SidecarSets into pods. Its clock and random source are the only non-determinism
// injection has; tests and the CLI pin them.
type Injector struct {
	Now  func() time.Time // required
	Rand func() float64   // [0,1); Partial injection revision policy
}

// Input is one pod and the SidecarSets the policies matched to it.
type Input struct {
	Pod         *corev1.Pod
	SidecarSets []*v1beta1.SidecarSet // matched by the policies, in decision order, defaulted and hashed
	// Prepared may hold, for SidecarSets[i], Prepare(SidecarSets[i]) made since it last changed;
	// nil (or a nil element) prepares in this call.
	Prepared []*Prepared
	History  history.Source // may be nil when no SidecarSet sets injectionStrategy.revision
	// PatchOnly says the caller needs the patch alone (the webhook): Result.Pod is then nil, and the
	// pod's merged lists, copies of every container and volume, are not built.
	PatchOnly bool
}

// Result is the injected pod and the patch that turns Input.Pod into it. Patch values share memory
// with Pod and the SidecarSets; treat both as read-only or copy before changing either.
type Result struct {
	Pod      *corev1.Pod                    // shares what injection left alone with Input.Pod, which is not modified; nil when Input.PatchOnly
	Patch    []jsonpatch.JsonPatchOperation // gomodules.xyz/jsonpatch/v2, built from the plan
	Injected []string                       // SidecarSets that injected something, in order
}

// Inject renders input.Pod with input.SidecarSets injected, as OpenKruise's pod webhook does on pod
// creation (compat §1.12 steps 6–9). Pods that are no longer active are returned unchanged: they will
// never start the sidecars.
func (in *Injector) Inject(input Input) (Result, error) {
	if in == nil || in.Now == nil {
		return Result{}, errors.New("mutation: Injector.Now is required")
	}
	if input.Pod == nil {
		return Result{}, errors.New("mutation: Input.Pod is nil")
	}
	if !IsActive(input.Pod) || len(input.SidecarSets) == 0 {
		res := Result{Patch: []jsonpatch.JsonPatchOperation{}}
		if !input.PatchOnly {
			res.Pod = shallowCopy(input.Pod)
		}
		return res, nil
	}
	// PatchOnly builds no pod: the plan reads input.Pod, and its annotations as patched from the
	// builder's map (the pod's own when nothing patches them), and nothing is written into it.
	pod := input.Pod
	if !input.PatchOnly {
		pod = shallowCopy(pod)
	}
	sets, err := in.chooseRevisions(input)
	if err != nil {
		return Result{}, err
	}
	b, err := newBuilder(pod, sets, metav1.NewTime(in.Now()), !input.PatchOnly)
	if err != nil {
		return Result{}, err
	}
	for i, ss := range sets {
		// A SidecarSet replaced by one of its revisions was not prepared.
		var p *Prepared
		if i < len(input.Prepared) && input.Prepared[i] != nil && input.Prepared[i].set == ss {
			p = input.Prepared[i]
		} else {
			p = Prepare(ss)
		}
		if err := b.addSidecarSet(ss, p); err != nil {
			return Result{}, err
		}
	}
	return b.result(input.Pod.Annotations), nil
}

// shallowCopy copies pod's struct, not its lists and maps: injection replaces every list and map it
// changes (annotations, containers, volumes, secrets) and never writes into one of the pod's, so
// the result can share the rest with the input. A deep copy of a real pod costs a large part of the
// injection (BenchmarkPerPod).
func shallowCopy(pod *corev1.Pod) *corev1.Pod {
	c := *pod
	return &c
}

// IsActive is Kubernetes' controller.IsPodActive, which OpenKruise uses to skip pods: a pod that
// has finished or is being deleted will never start a sidecar and no longer counts for a rollout.
// It is the one such predicate: the injection path and the controller both use it.
func IsActive(pod *corev1.Pod) bool {
	return pod != nil && pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// Random reports whether injecting ss may draw from Injector.Rand: its injection revision has the
// Partial policy. Everything else injection does is a function of its inputs and Injector.Now.
func Random(ss *v1beta1.SidecarSet) bool {
	r := ss.Spec.InjectionStrategy.Revision
	return r != nil && (r.RevisionName != nil || r.CustomVersion != nil) && r.Policy == v1beta1.PartialSidecarSetInjectRevisionPolicy
}

// chooseRevisions replaces each SidecarSet by the revision to inject (compat §1.5, W6–W14); the
// choice itself is sidecarset/history's. The list is input's own unless one is replaced.
func (in *Injector) chooseRevisions(input Input) ([]*v1beta1.SidecarSet, error) {
	out, replaced := input.SidecarSets, false
	for i, ss := range input.SidecarSets {
		if ss == nil {
			return nil, fmt.Errorf("mutation: Input.SidecarSets[%d] is nil", i)
		}
		// Package revisions falls back to the process-wide random source when given none; here
		// that would make injection irreproducible, so a Partial policy needs Injector.Rand.
		if Random(ss) && in.Rand == nil {
			return nil, fieldErr(ss.Name, "spec.injectionStrategy.revision.policy",
				errors.New("the Partial policy needs a random source, and Injector.Rand is nil"))
		}
		chosen, err := history.ForInjection(ss, input.Pod, input.History, in.Rand)
		if err != nil {
			return nil, fieldErr(ss.Name, "spec.injectionStrategy.revision", err)
		}
		if chosen != nil && chosen != ss {
			if !replaced {
				out, replaced = slices.Clone(out), true
			}
			out[i] = chosen
		}
	}
	return out, nil
}

// builder accumulates the injection plan over the SidecarSets, in order.
type builder struct {
	// pod is what the sidecars are built against, with its annotations as patched in ann: the
	// pod's own containers, not yet merged. OpenKruise builds every sidecar before merging any, so
	// one SidecarSet never shares volumes from, or transfers env from, another's sidecars. With
	// merge, pod is the result's, and the plan is merged into it; without, it is the caller's, and
	// nothing is written into it.
	pod   *corev1.Pod
	merge bool
	ann   map[string]string
	// podAnnotations says ann is the pod's own map, read only: result then writes no annotation into
	// it, and only those every injection writes change.
	podAnnotations bool
	now            metav1.Time
	sets           []*v1beta1.SidecarSet
	exclude        map[string]bool // excluded's, made at its first call

	hashes, hashesWithoutImage upgradeSpecs
	// working is the pod's working hot-upgrade containers, read at the first hot-upgrade sidecar:
	// the annotation is rewritten only when there is one.
	working    map[string]string
	hotUpgrade bool
	// versions holds the hot-upgrade version annotations until the end, as OpenKruise does, so
	// that no sidecar's fieldRef reads another sidecar's annotations.
	versions map[string]string

	// sharedMounts and sharedEnvs are what the app containers share (sharedWith), once sharedRead.
	sharedMounts []*corev1.VolumeMount
	sharedEnvs   []corev1.EnvVar
	sharedRead   bool

	containers, initContainers []placed
	volumes                    []*corev1.Volume // the SidecarSets' own, shared
	secrets                    []corev1.LocalObjectReference
	processed, injected        []string
}

// writesAnnotations reports whether injecting sets may write annotations besides those every
// injection writes: patched metadata, and a hot-upgrade sidecar's versions.
func writesAnnotations(sets []*v1beta1.SidecarSet) bool {
	for _, ss := range sets {
		if len(ss.Spec.PatchPodMetadata) > 0 {
			return true
		}
		for i := range ss.Spec.InitContainers {
			if isHotUpgrade(&ss.Spec.InitContainers[i]) {
				return true
			}
		}
		for i := range ss.Spec.Containers {
			if isHotUpgrade(&ss.Spec.Containers[i]) {
				return true
			}
		}
	}
	return false
}

// newBuilder's builder is a value, which Inject keeps on its stack.
func newBuilder(pod *corev1.Pod, sets []*v1beta1.SidecarSet, now metav1.Time, merge bool) (builder, error) {
	b := builder{pod: pod, merge: merge, now: now, sets: sets}
	if !merge && len(pod.Annotations) > 0 && !writesAnnotations(sets) {
		// The patch alone, and only the annotations every injection writes: those are compared
		// with the pod's own, which are not copied (result).
		b.ann, b.podAnnotations = pod.Annotations, true
	} else {
		// Metadata is patched first, and everything after reads the patched annotations, as in
		// OpenKruise (compat §1.12 step 6 before 7).
		// Room for the three annotations every injection writes (the hashes and the injected
		// list); patched metadata and hot upgrade, which write more, are rare enough to grow it.
		b.ann = make(map[string]string, len(pod.Annotations)+3)
		for k, v := range pod.Annotations {
			b.ann[k] = v
		}
		for _, ss := range sets {
			if err := PatchPodMetadata(b.ann, ss); err != nil {
				return builder{}, err
			}
		}
	}
	// What is recorded per SidecarSet shares one allocation per type.
	n := len(sets)
	entries, names := make([]upgradeSpec, 2*n), make([]string, 2*n)
	var err error
	if b.hashes, err = parseUpgradeSpecs(b.ann, v1beta1.SidecarSetHashAnnotation, entries[:n:n]); err != nil {
		return builder{}, err
	}
	if b.hashesWithoutImage, err = parseUpgradeSpecs(b.ann, v1beta1.SidecarSetHashWithoutImageAnnotation, entries[n:]); err != nil {
		return builder{}, err
	}
	b.processed, b.injected = names[:0:n], names[n:n]
	// The plan's lists are sized once: their elements are large structs, and growing them by
	// doubling was a noticeable share of the allocations with ten SidecarSets (BenchmarkPerPod).
	var inits, containers, volumes int
	for _, ss := range sets {
		for i := range ss.Spec.InitContainers {
			volumes += len(ss.Spec.InitContainers[i].VolumeMounts) + len(ss.Spec.InitContainers[i].VolumeDevices)
		}
		for i := range ss.Spec.Containers {
			volumes += len(ss.Spec.Containers[i].VolumeMounts) + len(ss.Spec.Containers[i].VolumeDevices)
		}
		inits, containers = inits+len(ss.Spec.InitContainers), containers+len(ss.Spec.Containers)
	}
	b.initContainers, b.containers = make([]placed, 0, inits), make([]placed, 0, containers)
	b.volumes = make([]*corev1.Volume, 0, volumes)
	return b, nil
}

// addSidecarSet builds one SidecarSet's sidecars (compat §1.12 step 7): init containers, then
// imagePullSecrets, then containers, each in spec order. p is ss prepared: what reads nothing of the
// pod is taken from it.
func (b *builder) addSidecarSet(ss *v1beta1.SidecarSet, p *Prepared) error {
	for i := range ss.Spec.InitContainers {
		sc := &ss.Spec.InitContainers[i]
		// Only native init containers live on as sidecars, and only they can be hot-upgrade twins.
		twins := isNativeSidecar(&sc.Container) && isHotUpgrade(sc)
		if err := b.place(&b.initContainers, ss, "spec.initContainers", i, sc, p.inits[i], p.initVolumes[i], twins); err != nil {
			return err
		}
	}
	b.secrets = append(b.secrets, ss.Spec.ImagePullSecrets...)
	for i := range ss.Spec.Containers {
		sc := &ss.Spec.Containers[i]
		if err := b.place(&b.containers, ss, "spec.containers", i, sc, p.containers[i], p.containerVolumes[i], isHotUpgrade(sc)); err != nil {
			return err
		}
	}

	// OpenKruise puts every matched SidecarSet in the injected list but writes hash entries only
	// for those that brought containers; doing the same keeps pods indistinguishable.
	b.processed = append(b.processed, ss.Name)
	if len(ss.Spec.InitContainers)+len(ss.Spec.Containers) == 0 {
		return nil
	}
	b.injected = append(b.injected, ss.Name)
	b.hashes.record(upgradeSpec{
		UpdateTimestamp:    b.now,
		Hash:               ss.Annotations[v1beta1.SidecarSetHashAnnotation],
		SidecarSetName:     ss.Name,
		SidecarList:        p.sidecarList,
		ControllerRevision: ss.Status.LatestRevision,
	})
	b.hashesWithoutImage.record(upgradeSpec{
		UpdateTimestamp: b.now,
		Hash:            ss.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation],
		SidecarSetName:  ss.Name,
		SidecarList:     p.sidecarList,
	})
	return nil
}

// place adds sc, the sidecar at index i of ss's list field, to list, with the catalogue volumes it
// refers to: prepared when it was, else built for this pod, as hot-upgrade twins when twins.
func (b *builder) place(list *[]placed, ss *v1beta1.SidecarSet, field string, i int, sc *v1beta1.SidecarContainer, prepared *corev1.Container, volumes []*corev1.Volume, twins bool) error {
	policy := sc.PodInjectPolicy
	b.volumes = append(b.volumes, volumes...)
	if prepared != nil {
		*list = append(*list, placed{container: prepared, policy: policy})
		return nil
	}
	own := ownCopy(sc)
	if err := b.build(ss, field, i, &own); err != nil {
		return err
	}
	if twins {
		if b.versions == nil { // made by the first hot-upgrade sidecar; most pods have none
			b.versions, b.working = map[string]string{}, workingHotUpgrade(b.ann)
		}
		c1, c2 := hotUpgradeTwins(&own, b.versions, b.working)
		*list = append(*list, c1, c2)
		b.hotUpgrade = true
		return nil
	}
	c := own.Container
	*list = append(*list, placed{container: &c, policy: policy})
	return nil
}

// ownCopy is the builder's copy of a SidecarSet's container: build replaces Resources and appends
// to Env, VolumeMounts and VolumeDevices, so those lists are clipped (an append then copies them) and
// everything else is shared with the SidecarSet, which the result pod therefore shares too (it is
// read-only). A deep copy here was a noticeable share of the per-pod allocations with ten sidecars.
func ownCopy(sc *v1beta1.SidecarContainer) v1beta1.SidecarContainer {
	c := *sc
	c.Env, c.VolumeMounts, c.VolumeDevices = slices.Clip(c.Env), slices.Clip(c.VolumeMounts), slices.Clip(c.VolumeDevices)
	return c
}

// build completes one sidecar in place (sc is the builder's own copy): resources, then shared
// mounts, env and devices, in OpenKruise's merge order (compat §1.13), so that the env list reads
// own, IS_INJECTED, transferred, subPathExpr. Only a sidecar that readsPod reads b.pod; the others
// are built by Prepare.
// The sidecar is the SidecarSet's list[index], named in an error only.
func (b *builder) build(ss *v1beta1.SidecarSet, list string, index int, sc *v1beta1.SidecarContainer) error {
	if sc.ResourcesPolicy != nil {
		r, err := resourcespolicy.Compute(b.pod, sc, b.excluded())
		if err != nil {
			return fieldErr(ss.Name, fmt.Sprintf("%s[%d].resourcesPolicy", list, index), err)
		}
		sc.Resources = r
	}
	mounts, subPathEnvs := b.sharedWith(sc)
	extraEnv := mergeEnv(transferEnvs(sc, b.pod, b.ann), subPathEnvs)

	sc.VolumeMounts = mergeMounts(sc.VolumeMounts, mounts, sc.VolumeDevices)
	env := make([]corev1.EnvVar, 0, len(sc.Env)+1+len(extraEnv))
	env = append(append(env, sc.Env...), corev1.EnvVar{Name: v1beta1.SidecarEnvInjected, Value: "true"})
	sc.Env = mergeEnv(env, extraEnv)
	sc.VolumeDevices = mergeDevices(sc.VolumeDevices, sharedDevices(sc, b.pod), sc.VolumeMounts)
	return nil
}

// excluded returns the names resourcesPolicy must not aggregate over: every sidecar of the
// SidecarSets being injected (compat §1.19). Collected at the first sidecar with resourcesPolicy.
func (b *builder) excluded() map[string]bool {
	if b.exclude == nil {
		b.exclude = map[string]bool{}
		for _, ss := range b.sets {
			for i := range ss.Spec.InitContainers {
				b.exclude[ss.Spec.InitContainers[i].Name] = true
			}
			for i := range ss.Spec.Containers {
				b.exclude[ss.Spec.Containers[i].Name] = true
			}
		}
	}
	return b.exclude
}

// sharedWith is sharedMountsAndEnvs, read from the pod once: the app containers do not change while
// the sidecars are built, and with many sharing SidecarSets the same lists were collected for each.
func (b *builder) sharedWith(sc *v1beta1.SidecarContainer) ([]*corev1.VolumeMount, []corev1.EnvVar) {
	if sc.ShareVolumePolicy.Type != v1beta1.ShareVolumePolicyEnabled {
		return nil, nil
	}
	if !b.sharedRead {
		b.sharedMounts, b.sharedEnvs = sharedMountsAndEnvs(sc, b.pod)
		b.sharedRead = true
	}
	return b.sharedMounts, b.sharedEnvs
}

// result derives the patch from the plan and, with merge, merges the plan into the pod
// (compat §1.12 step 9).
func (b *builder) result(origAnnotations map[string]string) Result {
	pod := b.pod
	if len(b.containers) == 0 && len(b.initContainers) == 0 {
		// Nothing to inject: only patchPodMetadata may have changed the pod.
		return b.done(annotationOps([]jsonpatch.JsonPatchOperation{}, origAnnotations, b.ann))
	}

	sortByName(b.initContainers)
	gi := mergeContainers(pod.Spec.InitContainers, b.initContainers)
	gc := mergeContainers(pod.Spec.Containers, b.containers)
	gv := mergeVolumes(pod.Spec.Volumes, b.volumes)
	if b.merge {
		pod.Spec.InitContainers, pod.Spec.Containers, pod.Spec.Volumes = gi.apply(pod.Spec.InitContainers), gc.apply(pod.Spec.Containers), gv.apply(pod.Spec.Volumes)
	}
	// Sized once: with ten SidecarSets, growing the patch by doubling was a noticeable share of the
	// injection's bytes (BenchmarkPerPod). The annotations take three or four operations; more grows it.
	patch := make([]jsonpatch.JsonPatchOperation, 0, gi.size()+gc.size()+gv.size()+5)
	patch = gi.appendOps(patch, pathInitContainers)
	patch = gc.appendOps(patch, pathContainers)
	patch = gv.appendOps(patch, pathVolumes)

	if secrets, changed := mergeSecrets(pod.Spec.ImagePullSecrets, b.secrets); changed {
		if len(pod.Spec.ImagePullSecrets) == 0 {
			patch = append(patch, opAdd(pathImagePullSecrets, secrets))
		} else {
			patch = append(patch, opReplace(pathImagePullSecrets, secrets))
		}
		if b.merge {
			pod.Spec.ImagePullSecrets = secrets
		}
	}

	written := [...]annotation{
		{v1beta1.SidecarSetHashAnnotation, b.hashes.marshal()},
		{v1beta1.SidecarSetHashWithoutImageAnnotation, b.hashesWithoutImage.marshal()},
		{v1beta1.SidecarSetListAnnotation, injectedList(b.ann[v1beta1.SidecarSetListAnnotation], b.processed)},
	}
	if b.podAnnotations {
		changed := written[:0]
		for _, a := range written {
			if old, ok := b.ann[a.key]; !ok || old != a.value {
				changed = append(changed, a)
			}
		}
		return b.done(appendAnnotationOps(patch, b.ann, changed))
	}
	for _, a := range written {
		b.ann[a.key] = a.value
	}
	if b.hotUpgrade {
		for k, v := range b.versions {
			b.ann[k] = v
		}
		b.ann[v1beta1.SidecarSetWorkingHotUpgradeContainer] = marshalString(b.working)
	}
	return b.done(annotationOps(patch, origAnnotations, b.ann))
}

// done is the result of the patch, with the pod, and its annotations as patched, when merged. A pod
// without annotations keeps a nil map when nothing was patched into it.
func (b *builder) done(patch []jsonpatch.JsonPatchOperation) Result {
	if len(b.injected) == 0 {
		b.injected = nil // as it was before any SidecarSet: nothing injected
	}
	if !b.merge {
		return Result{Patch: patch, Injected: b.injected}
	}
	if b.pod.Annotations != nil || len(b.ann) > 0 {
		b.pod.Annotations = b.ann
	}
	return Result{Pod: b.pod, Patch: patch, Injected: b.injected}
}
