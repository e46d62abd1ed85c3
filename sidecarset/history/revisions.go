package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/hashes"
)

// Source gives read access to the ControllerRevisions of the kruise namespace. Implementations
// return shared objects: callers must not modify them.
type Source interface {
	// ByName returns the revision with that name, whoever owns it (OpenKruise does no ownership
	// check for injectionStrategy.revision.revisionName).
	ByName(name string) (*appsv1.ControllerRevision, bool)
	// ForSidecarSet returns the revisions labelled kruise.io/sidecarset-name=<sidecarSetName>, in
	// any order.
	ForSidecarSet(sidecarSetName string) []*appsv1.ControllerRevision // any order
}

// NewStaticSource returns a Source over a fixed set of revisions (nil entries are skipped; of two
// revisions with the same name the later wins). It keeps the pointers, so the revisions must not
// be modified afterwards; it is then safe for concurrent use.
func NewStaticSource(crs ...*appsv1.ControllerRevision) Source {
	s := staticSource{byName: map[string]*appsv1.ControllerRevision{}, bySet: map[string][]*appsv1.ControllerRevision{}}
	for _, cr := range crs {
		if cr != nil {
			s.byName[cr.Name] = cr
		}
	}
	for _, cr := range s.byName {
		if set, ok := cr.Labels[v1beta1.SidecarSetNameLabel]; ok {
			s.bySet[set] = append(s.bySet[set], cr)
		}
	}
	return s
}

type staticSource struct {
	byName map[string]*appsv1.ControllerRevision
	bySet  map[string][]*appsv1.ControllerRevision
}

func (s staticSource) ByName(name string) (*appsv1.ControllerRevision, bool) {
	cr, ok := s.byName[name]
	return cr, ok
}

func (s staticSource) ForSidecarSet(name string) []*appsv1.ControllerRevision {
	return append([]*appsv1.ControllerRevision(nil), s.bySet[name]...)
}

// revisionFields are the spec fields a revision records; everything else in the spec is dropped
// when a revision is restored ("$patch": "replace").
var revisionFields = []string{"volumes", "containers", "initContainers", "imagePullSecrets", "patchPodMetadata"}

// Raw returns the data.raw a ControllerRevision of ss stores (compat §1.10):
// {"spec":{"$patch":"replace", <the five recorded fields, null when absent>}}. Names and equality
// of revisions depend on these exact bytes, so they are produced as OpenKruise does: encode the
// object, decode it into generic JSON, re-encode the chosen fields (keys sorted, numbers through
// float64).
func Raw(ss *v1beta1.SidecarSet) ([]byte, error) {
	if ss == nil {
		return nil, errors.New("revisions: nil SidecarSet")
	}
	b, err := json.Marshal(ss)
	if err != nil {
		return nil, fmt.Errorf("sidecarset %q: encoding for revision: %w", ss.Name, err)
	}
	var obj map[string]interface{}
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("sidecarset %q: decoding for revision: %w", ss.Name, err)
	}
	spec, _ := obj["spec"].(map[string]interface{})
	out := map[string]interface{}{"$patch": "replace"}
	for _, f := range revisionFields {
		out[f] = spec[f]
	}
	raw, err := json.Marshal(map[string]interface{}{"spec": out})
	if err != nil {
		return nil, fmt.Errorf("sidecarset %q: encoding revision data: %w", ss.Name, err)
	}
	return raw, nil
}

// Name returns the name of ss's ControllerRevision with data raw (Kubernetes'
// history.HashControllerRevision and ControllerRevisionName): <name>-<SafeEncodeString(decimal
// FNV-1 32 of raw followed by decimal collisionCount)>, the name prefix cut to 223 characters so
// that the result stays a valid object name.
func Name(ss *v1beta1.SidecarSet, raw []byte, collisionCount int32) string {
	prefix := ""
	if ss != nil {
		prefix = ss.Name
	}
	if len(prefix) > 223 {
		prefix = prefix[:223]
	}
	return prefix + "-" + Hash(raw, collisionCount)
}

// Hash is the revision hash of raw (the controller.kubernetes.io/hash label value).
func Hash(raw []byte, collisionCount int32) string {
	h := fnv.New32() // FNV-1, not FNV-1a: Kubernetes' choice, and names must match OpenKruise's
	h.Write(raw)
	h.Write([]byte(strconv.FormatInt(int64(collisionCount), 10)))
	return utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// Find returns the ControllerRevision ss's injectionStrategy.revision points at: revisionName
// (exact name) wins over customVersion (the revision with the highest .revision among those
// labelled with both the custom version and ss's name). Nothing configured → (nil, nil).
// Configured but not found → an error, which denies the pod (compat §1.5 step 2).
func Find(ss *v1beta1.SidecarSet, src Source) (*appsv1.ControllerRevision, error) {
	if ss == nil {
		return nil, errors.New("revisions: nil SidecarSet")
	}
	ref := ss.Spec.InjectionStrategy.Revision
	if ref == nil || (ref.RevisionName == nil && ref.CustomVersion == nil) {
		return nil, nil
	}
	if src == nil {
		return nil, fmt.Errorf("sidecarset %q: injectionStrategy.revision is set but no ControllerRevisions were provided", ss.Name)
	}
	if ref.RevisionName != nil {
		cr, ok := src.ByName(*ref.RevisionName)
		if !ok || cr == nil {
			return nil, fmt.Errorf("sidecarset %q: injectionStrategy.revision.revisionName: ControllerRevision %q not found", ss.Name, *ref.RevisionName)
		}
		return cr, nil
	}
	var found []*appsv1.ControllerRevision
	for _, cr := range src.ForSidecarSet(ss.Name) {
		if cr == nil || cr.Labels[v1beta1.SidecarSetNameLabel] != ss.Name {
			continue
		}
		// Present and equal, as a label selector requires (an empty customVersion does not
		// match revisions without the label).
		if v, ok := cr.Labels[v1beta1.SidecarSetCustomVersionLabel]; ok && v == *ref.CustomVersion {
			found = append(found, cr)
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("sidecarset %q: injectionStrategy.revision.customVersion: no ControllerRevision labelled %s=%s and %s=%s",
			ss.Name, v1beta1.SidecarSetCustomVersionLabel, *ref.CustomVersion, v1beta1.SidecarSetNameLabel, ss.Name)
	}
	Sort(found)
	return found[len(found)-1], nil
}

// Sort orders as Kubernetes' history.SortControllerRevisions: by .revision, then creation time,
// then name, so that the "newest" revision is deterministic whatever order a Source returns.
func Sort(crs []*appsv1.ControllerRevision) {
	sort.SliceStable(crs, func(i, j int) bool {
		a, b := crs[i], crs[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// Restore returns ss as recorded in cr: ss's JSON strategic-merge-patched with cr's data.raw (whose
// "$patch": "replace" makes the spec exactly the five recorded fields), the hash annotations taken
// from cr (recomputed when cr lacks them) and status.latestRevision = cr's name. ss is not
// modified.
func Restore(ss *v1beta1.SidecarSet, cr *appsv1.ControllerRevision) (*v1beta1.SidecarSet, error) {
	if ss == nil {
		return nil, errors.New("revisions: nil SidecarSet")
	}
	if cr == nil {
		return nil, fmt.Errorf("sidecarset %q: restoring a nil ControllerRevision", ss.Name)
	}
	fail := func(format string, args ...any) (*v1beta1.SidecarSet, error) {
		return nil, fmt.Errorf("sidecarset %q: restoring ControllerRevision %q: %s", ss.Name, cr.Name, fmt.Sprintf(format, args...))
	}
	patch := cr.Data.Raw
	if len(patch) == 0 && cr.Data.Object != nil {
		b, err := json.Marshal(cr.Data.Object)
		if err != nil {
			return fail("encoding data.object: %v", err)
		}
		patch = b
	}
	if len(patch) == 0 {
		return fail("data.raw is empty")
	}
	original, err := json.Marshal(ss)
	if err != nil {
		return fail("encoding SidecarSet: %v", err)
	}
	patched, err := strategicpatch.StrategicMergePatch(original, patch, v1beta1.SidecarSet{})
	if err != nil {
		return fail("applying data.raw: %v", err)
	}
	restored := &v1beta1.SidecarSet{}
	if err := json.Unmarshal(patched, restored); err != nil {
		return fail("decoding the patched SidecarSet: %v", err)
	}
	if restored.Annotations == nil {
		restored.Annotations = map[string]string{}
	}
	for _, h := range []struct {
		key  string
		calc func(*v1beta1.SidecarSet) (string, error)
	}{
		{v1beta1.SidecarSetHashAnnotation, hashes.SidecarSetHash},
		{v1beta1.SidecarSetHashWithoutImageAnnotation, hashes.SidecarSetHashWithoutImage},
	} {
		if v := cr.Annotations[h.key]; v != "" {
			restored.Annotations[h.key] = v
			continue
		}
		v, err := h.calc(restored)
		if err != nil {
			return fail("computing %s: %v", h.key, err)
		}
		restored.Annotations[h.key] = v
	}
	restored.Status.LatestRevision = cr.Name
	return restored, nil
}

// ForInjection returns the SidecarSet to inject into a new pod (compat §1.5,
// getSuitableRevisionSidecarSet): ss itself, or a restored historical copy, when
// injectionStrategy.revision is set:
//
//  1. revision unset, or neither revisionName nor customVersion set → ss;
//  2. the revision cannot be found or restored → error (the pod is denied);
//  3. updateStrategy.paused → historical;
//  4. policy Partial: a pod outside updateStrategy.selector → historical; otherwise, with a
//     percentage partition p%, historical when rand() <= p/100 (so 100% is always historical and
//     0% is historical only when rand() returns exactly 0, as in OpenKruise), else ss; with an
//     integer or no partition → ss;
//  5. any other policy (Always, the default) → historical.
//
// ss is returned as is, not copied: callers that modify the result must copy it. rand returns a
// number in [0,1); nil means math/rand/v2.Float64.
func ForInjection(ss *v1beta1.SidecarSet, pod *corev1.Pod, src Source, rand func() float64) (*v1beta1.SidecarSet, error) {
	if ss == nil {
		return nil, errors.New("revisions: nil SidecarSet")
	}
	ref := ss.Spec.InjectionStrategy.Revision
	if ref == nil || (ref.RevisionName == nil && ref.CustomVersion == nil) {
		return ss, nil
	}
	cr, err := Find(ss, src)
	if err != nil {
		return nil, err
	}
	historical, err := Restore(ss, cr)
	if err != nil {
		return nil, err
	}
	if ss.Spec.UpdateStrategy.Paused {
		return historical, nil
	}
	if ref.Policy != v1beta1.PartialSidecarSetInjectRevisionPolicy {
		return historical, nil
	}
	if sel := ss.Spec.UpdateStrategy.Selector; sel != nil {
		selector, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil, fmt.Errorf("sidecarset %q: updateStrategy.selector: %w", ss.Name, err)
		}
		var podLabels map[string]string
		if pod != nil {
			podLabels = pod.Labels
		}
		if !selector.Matches(labels.Set(podLabels)) {
			return historical, nil
		}
	}
	return pickRandomly(ss, historical, rand)
}

func pickRandomly(latest, historical *v1beta1.SidecarSet, rnd func() float64) (*v1beta1.SidecarSet, error) {
	partition := latest.Spec.UpdateStrategy.Partition
	if partition == nil || partition.Type == intstr.Int {
		return latest, nil
	}
	p, err := parsePercentage(partition.StrVal)
	if err != nil {
		return nil, fmt.Errorf("sidecarset %q: updateStrategy.partition %q: %w", latest.Name, partition.StrVal, err)
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	if rnd() <= p {
		return historical, nil
	}
	return latest, nil
}

// parsePercentage parses "<number>%" into a fraction (50% → 0.5).
func parsePercentage(s string) (float64, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, errors.New("not a percentage (want e.g. \"20%\")")
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("invalid percentage")
	}
	return f / 100, nil
}
