package hashes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// SidecarSetHash returns the kruise.io/sidecarset-hash value of ss.
func SidecarSetHash(ss *v1beta1.SidecarSet) (string, error) {
	if ss == nil {
		return "", errors.New("hash: nil SidecarSet")
	}
	return hashOf(ss.Spec.Containers, ss.Spec.InitContainers)
}

// SidecarSetHashWithoutImage returns the kruise.io/sidecarset-hash-without-image value of ss: the
// controller compares it to decide whether a pod can be upgraded in place (image-only change).
func SidecarSetHashWithoutImage(ss *v1beta1.SidecarSet) (string, error) {
	if ss == nil {
		return "", errors.New("hash: nil SidecarSet")
	}
	return hashOf(withoutImages(ss.Spec.Containers), withoutImages(ss.Spec.InitContainers))
}

// Encode returns the exact bytes that are hashed (exported for tests and for debugging hash
// mismatches against OpenKruise).
func Encode(containers, initContainers []v1beta1.SidecarContainer) ([]byte, error) {
	m := map[string]interface{}{"containers": containers}
	// OpenKruise adds initContainers only when a native sidecar exists, so that SidecarSets written
	// before native sidecars existed keep their hash (and their pods are not rolled).
	if hasNativeSidecar(initContainers) {
		m["initContainers"] = initContainers
	}
	return json.Marshal(m)
}

func hashOf(containers, initContainers []v1beta1.SidecarContainer) (string, error) {
	b, err := Encode(containers, initContainers)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return utilrand.SafeEncodeString(hex.EncodeToString(sum[:])), nil
}

func hasNativeSidecar(cs []v1beta1.SidecarContainer) bool {
	for i := range cs {
		if p := cs[i].RestartPolicy; p != nil && *p == corev1.ContainerRestartPolicyAlways {
			return true
		}
	}
	return false
}

// withoutImages returns a copy with every image blanked; a nil input stays nil so that it still
// encodes as null.
func withoutImages(cs []v1beta1.SidecarContainer) []v1beta1.SidecarContainer {
	if cs == nil {
		return nil
	}
	out := make([]v1beta1.SidecarContainer, len(cs))
	for i := range cs {
		// Shallow copies suffice: only the top-level Image string is changed.
		out[i] = cs[i]
		out[i].Image = ""
	}
	return out
}
