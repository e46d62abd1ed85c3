package bundles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Document turns a defaulted SidecarSet into the document the policies read of it beside others,
// as data.sidecarops.state.sidecarsets[name]: only what they read (docs/design.md, "Bundle
// contract"), as the data holds one per SidecarSet. The shape is fixed and explicit (no omitted
// keys) so policies never need defaults for absent fields.
func Document(ss *v1beta1.SidecarSet) (map[string]any, error) {
	volumeHashes := make(map[string]any, len(ss.Spec.Volumes))
	for i := range ss.Spec.Volumes {
		digest, err := volumeDigest(&ss.Spec.Volumes[i])
		if err != nil {
			return nil, fmt.Errorf("SidecarSet/%s: spec.volumes[%d]: %w", ss.Name, i, err)
		}
		volumeHashes[ss.Spec.Volumes[i].Name] = digest
	}
	patches := make([]any, 0, len(ss.Spec.PatchPodMetadata))
	for _, p := range ss.Spec.PatchPodMetadata {
		annotations := make(map[string]any, len(p.Annotations))
		for k, v := range p.Annotations {
			annotations[k] = v
		}
		patches = append(patches, map[string]any{"annotations": annotations, "patchPolicy": string(p.PatchPolicy)})
	}
	base, canary := canaryBase(ss)
	return map[string]any{
		"created":           created(ss),
		"canary":            canary,
		"base":              base,
		"selector":          selectorDoc(ss.Spec.Selector),
		"namespaceSelector": selectorDoc(ss.Spec.NamespaceSelector),
		"injectionPaused":   ss.Spec.InjectionStrategy.Paused,
		"containers":        containerNames(ss.Spec.Containers),
		"initContainers":    containerNames(ss.Spec.InitContainers),
		"volumeHashes":      volumeHashes,
		"patchPodMetadata":  patches,
	}, nil
}

// Normalize is the document of a SidecarSet under review, the input of the conflict and whitelist
// decisions: its Document, with its name, its labels (the whitelist's rules select on them) and its
// volumes' names in spec order (the conflict policy's field paths).
func Normalize(ss *v1beta1.SidecarSet) (map[string]any, error) {
	doc, err := Document(ss)
	if err != nil {
		return nil, err
	}
	volumeNames := make([]any, 0, len(ss.Spec.Volumes))
	for _, v := range ss.Spec.Volumes {
		volumeNames = append(volumeNames, v.Name)
	}
	doc["name"], doc["labels"], doc["volumeNames"] = ss.Name, stringMap(ss.Labels), volumeNames
	return doc, nil
}

// created is the creation time as RFC 3339 in UTC, which orders as text ("" when unset, as in
// files given to sidecarctl: those then order by name alone).
func created(ss *v1beta1.SidecarSet) string {
	if ss.CreationTimestamp.IsZero() {
		return ""
	}
	return ss.CreationTimestamp.UTC().Format(time.RFC3339)
}

// canaryBase returns the base of a canary SidecarSet (compat §1.21): annotated canary "true"
// (case-sensitive) with a non-empty base other than itself. Validation refuses a SidecarSet that
// names itself as its base; one that got past it (created while no webhook ran) is taken as not a
// canary, as one without a base is, rather than as displacing itself from every pod it selects.
// The match policy relies on it: no canary is its own base.
func canaryBase(ss *v1beta1.SidecarSet) (string, bool) {
	base := ss.Annotations[v1beta1.SidecarSetBaseAnnotation]
	if ss.Annotations[v1beta1.SidecarSetCanaryAnnotation] != "true" || base == "" || base == ss.Name {
		return "", false
	}
	return base, true
}

// volumeDigest identifies a volume definition: equal digests mean equal definitions (OpenKruise
// compares volumes with DeepEqual), so the conflict policy can skip identical declarations unread.
func volumeDigest(v *corev1.Volume) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

func selectorDoc(s *metav1.LabelSelector) any {
	if s == nil {
		return nil
	}
	exprs := make([]any, 0, len(s.MatchExpressions))
	for _, e := range s.MatchExpressions {
		values := make([]any, 0, len(e.Values))
		for _, v := range e.Values {
			values = append(values, v)
		}
		exprs = append(exprs, map[string]any{"key": e.Key, "operator": string(e.Operator), "values": values})
	}
	return map[string]any{"matchLabels": stringMap(s.MatchLabels), "matchExpressions": exprs}
}

// namespaceDoc adds the name label the API server puts on every Namespace, so offline manifests
// that omit it are judged as the cluster would judge them.
func namespaceDoc(ns *corev1.Namespace) map[string]any {
	labels := stringMap(ns.Labels)
	labels[v1beta1.NamespaceNameLabel] = ns.Name
	return map[string]any{"labels": labels}
}

func containerNames(cs []v1beta1.SidecarContainer) []any {
	names := make([]any, 0, len(cs))
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
