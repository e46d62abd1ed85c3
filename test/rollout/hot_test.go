package rollout

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/kwok"
)

const emptyImage = "example.com/empty:1"

// hotState is what a hot-upgraded pod says about its twins.
type hotState struct {
	working              string
	image1, image2       string
	version1, version2   string
	versionAlt1, altVer2 string
}

func readHot(p *corev1.Pod) hotState {
	a := p.Annotations
	return hotState{
		working:     a[v1beta1.SidecarSetWorkingHotUpgradeContainer],
		image1:      specImage(p, sidecar+"-1"),
		image2:      specImage(p, sidecar+"-2"),
		version1:    a[v1beta1.SidecarSetVersionAnnotationPrefix+sidecar+"-1"],
		version2:    a[v1beta1.SidecarSetVersionAnnotationPrefix+sidecar+"-2"],
		versionAlt1: a[v1beta1.SidecarSetVersionAltAnnotationPrefix+sidecar+"-1"],
		altVer2:     a[v1beta1.SidecarSetVersionAltAnnotationPrefix+sidecar+"-2"],
	}
}

func atLeast(t *testing.T, version string, floor string, what string) {
	t.Helper()
	v, err := strconv.ParseUint(version, 10, 64)
	require.NoError(t, err, "%s: %q is not a resourceVersion", what, version)
	f, _ := strconv.ParseUint(floor, 10, 64)
	assert.GreaterOrEqual(t, v, f, "%s: the SidecarSet's resourceVersion at the upgrade", what)
}

// TestHotUpgradeRoundTrip: -1 → -2 → -1 with the annotations of each step (compat §3.9, compat §4.8 E9):
// the idle twin receives the new image and starts working while the old one still runs (the
// migration window the watch must see), then the old twin is reset to the empty image.
func TestHotUpgradeRoundTrip(t *testing.T) {
	const n = 2
	f := newFleet(t, "hot", n, func(ss *v1beta1.SidecarSet) {
		ss.Spec.Containers[0].UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{
			UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: emptyImage,
		}
		ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromString("100%"))
	}, nil)
	for _, p := range f.list() {
		assert.Equal(t, hotState{
			working: `{"sidecar":"sidecar-1"}`, image1: image("1"), image2: emptyImage,
			version1: "1", versionAlt1: "0", version2: "0", altVer2: "1",
		}, readHot(p), "%s as injected", p.Name)
	}

	// Both twins running, the new one working: seen through the watch between steps 1 and 3.
	var mu sync.Mutex
	migrating := map[string]hotState{}
	pw := f.watchPods(func(pods map[string]*corev1.Pod) error {
		for _, p := range pods {
			h := readHot(p)
			if h.image1 != emptyImage && h.image2 != emptyImage {
				mu.Lock()
				migrating[p.Name+"/"+h.working] = h
				mu.Unlock()
			}
		}
		return nil
	})

	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })
	rv2 := f.sidecarSet().ResourceVersion
	f.waitStatus(counts{n, n, n, n})
	eventually(t, "old twins reset and running the empty image", func() error {
		for _, p := range f.list() {
			if containerStatus(p, sidecar+"-1").Image != emptyImage || containerStatus(p, sidecar+"-2").Image != image("2") {
				return fmt.Errorf("%s: -1 runs %s, -2 runs %s", p.Name, containerStatus(p, sidecar+"-1").Image, containerStatus(p, sidecar+"-2").Image)
			}
		}
		return nil
	})
	v2 := map[string]string{}
	for _, p := range f.list() {
		h := readHot(p)
		assert.Equal(t, `{"sidecar":"sidecar-2"}`, h.working, p.Name)
		assert.Equal(t, image("2"), h.image2)
		assert.Equal(t, emptyImage, h.image1)
		atLeast(t, h.version2, rv2, p.Name+" version of -2")
		assert.Equal(t, h.version2, h.versionAlt1, "%s: the old twin's alt is the new version", p.Name)
		assert.Equal(t, "0", h.version1, "%s: the reset twin is at version 0", p.Name)
		assert.Equal(t, "0", h.altVer2, "%s: after the reset the working twin has no alternative", p.Name)
		assert.Equal(t, int32(1), containerStatus(p, sidecar+"-1").RestartCount, "%s: -1 restarted once (reset)", p.Name)
		assert.Equal(t, int32(1), containerStatus(p, sidecar+"-2").RestartCount, "%s: -2 restarted once (upgrade)", p.Name)
		e, ok := hasEvent(events(t, p), "ResetContainerSucceed")
		assert.True(t, ok, "%s: reset event", p.Name)
		assert.Equal(t, corev1.EventTypeNormal, e.Type)
		v2[p.Name] = h.version2

		mu.Lock()
		mid, seen := migrating[p.Name+`/{"sidecar":"sidecar-2"}`]
		mu.Unlock()
		require.True(t, seen, "%s: the watch saw both twins running with -2 working", p.Name)
		assert.Equal(t, image("1"), mid.image1, "%s: the old twin keeps serving during migration", p.Name)
		assert.Equal(t, "1", mid.altVer2, "%s: during migration -2's alt is -1's version", p.Name)
	}

	// And back to -1.
	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("3") })
	rv3 := f.sidecarSet().ResourceVersion
	f.waitStatus(counts{n, n, n, n})
	eventually(t, "second round trip done", func() error {
		for _, p := range f.list() {
			if containerStatus(p, sidecar+"-1").Image != image("3") || containerStatus(p, sidecar+"-2").Image != emptyImage {
				return fmt.Errorf("%s: -1 runs %s, -2 runs %s", p.Name, containerStatus(p, sidecar+"-1").Image, containerStatus(p, sidecar+"-2").Image)
			}
		}
		return nil
	})
	pw.check(t)
	for _, p := range f.list() {
		h := readHot(p)
		assert.Equal(t, `{"sidecar":"sidecar-1"}`, h.working, p.Name)
		atLeast(t, h.version1, rv3, p.Name+" version of -1")
		assert.Equal(t, "0", h.versionAlt1)
		assert.Equal(t, "0", h.version2)
		assert.Equal(t, h.version1, h.altVer2)
		assert.Equal(t, kwok.ImageID(image("3")), containerStatus(p, sidecar+"-1").ImageID)
		mu.Lock()
		mid, seen := migrating[p.Name+`/{"sidecar":"sidecar-1"}`]
		mu.Unlock()
		require.True(t, seen, "%s: the watch saw both twins running with -1 working", p.Name)
		assert.Equal(t, v2[p.Name], mid.versionAlt1, "%s: during the second migration -1's alt is -2's version", p.Name)
	}
}
