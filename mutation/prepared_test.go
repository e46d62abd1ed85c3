package mutation

import (
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// What prepare keeps of a sidecar must be what build makes of it for any pod: over the property
// generator's SidecarSets and pods, every prepared sidecar equals the one built for the pod, and
// the prepared volumes are those the sidecar refers to.
func TestPreparedIsBuiltPerPod(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(5, 8))}
	prepared, perPod := 0, 0
	for run := range 1000 {
		pod, sets := g.pod(), g.sidecarSets()
		b, err := newBuilder(pod, sets, metav1.NewTime(testNow), false)
		if err != nil {
			continue
		}
		for _, ss := range sets {
			p := Prepare(ss)
			for _, list := range []struct {
				field    string
				sidecars []v1beta1.SidecarContainer
				built    []*corev1.Container
				volumes  [][]*corev1.Volume
			}{
				{"spec.initContainers", ss.Spec.InitContainers, p.inits, p.initVolumes},
				{"spec.containers", ss.Spec.Containers, p.containers, p.containerVolumes},
			} {
				for i := range list.sidecars {
					sc := &list.sidecars[i]
					if got := list.volumes[i]; !reflect.DeepEqual(got, p.catalogue.appendReferenced(nil, sc)) {
						t.Fatalf("run %d: %s %s[%d]: prepared volumes %v", run, ss.Name, list.field, i, got)
					}
					if list.built[i] == nil {
						perPod++
						if !readsPod(sc) && !isHotUpgrade(sc) {
							t.Fatalf("run %d: %s %s[%d] reads nothing of the pod but was not prepared", run, ss.Name, list.field, i)
						}
						continue
					}
					prepared++
					own := ownCopy(sc)
					if err := b.build(ss, list.field, i, &own); err != nil {
						t.Fatalf("run %d: build: %v", run, err)
					}
					if !reflect.DeepEqual(*list.built[i], own.Container) {
						t.Fatalf("run %d: %s %s[%d]:\nprepared %s\nbuilt    %s", run, ss.Name, list.field, i, mustJSON(t, list.built[i]), mustJSON(t, own.Container))
					}
				}
			}
		}
	}
	if prepared < 100 || perPod < 100 {
		t.Fatalf("generator too weak: %d prepared and %d built per pod", prepared, perPod)
	}
}

// Inject uses what it is given prepared only for the SidecarSet it was prepared from: one replaced
// by a revision, or prepared for another object, is prepared again.
func TestInjectUsesPreparedOfItsSidecarSet(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	ss.Spec.Containers = []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "c", Image: "one"}}}
	stale := Prepare(ss)
	stale.containers[0].Image = "from the prepared"
	res, err := fixedInjector().Inject(Input{Pod: pod, SidecarSets: []*v1beta1.SidecarSet{ss}, Prepared: []*Prepared{stale}})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "the prepared sidecar is the one injected", res.Pod.Spec.Containers[1].Image, "from the prepared")

	other := ss.DeepCopy()
	res, err = fixedInjector().Inject(Input{Pod: pod, SidecarSets: []*v1beta1.SidecarSet{other}, Prepared: []*Prepared{stale}})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "prepared for another object: ignored", res.Pod.Spec.Containers[1].Image, "one")
}
