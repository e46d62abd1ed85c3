package mutation

import (
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"
	"weak"

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
		b, err := newBuilder(pod, sets, metav1.NewTime(testNow))
		if err != nil {
			continue
		}
		for _, ss := range sets {
			p := prepare(ss)
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

// A SidecarSet is prepared once, and what was prepared for it goes with it.
func TestPreparedLivesWithItsSidecarSet(t *testing.T) {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	ss.Spec.Containers = []v1beta1.SidecarContainer{{}}
	ss.Spec.Containers[0].Name = "c"
	p := prepare(ss)
	if prepare(ss) != p {
		t.Fatal("a second prepare made another")
	}
	key := weak.Make(ss)
	runtime.KeepAlive(ss)
	ss = nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if _, ok := preparedSets.Load(key); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the prepared entry outlived its SidecarSet")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
