package mutation

import (
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/randomobjects"
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

// readsPod is kept by hand against what building a sidecar reads of the pod: a sidecar it lets
// through is built once, without a pod, for every pod (Prepare). Every field of SidecarContainer,
// its own and its container's, found by reflection so that a new one is tried without being
// listed, is set alone on a plain sidecar, to the property generator's values or random ones; if
// readsPod lets that sidecar through, it must build as prepared for every generated pod. If this
// fails, readsPod must name the field.
func TestReadsPodEveryField(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(3, 4))}
	pods := make([]*corev1.Pod, 20)
	for i := range pods {
		pods[i] = g.pod()
	}
	typ := reflect.TypeFor[v1beta1.SidecarContainer]()
	var fields [][]int
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Anonymous {
			for j := range f.Type.NumField() {
				fields = append(fields, []int{i, j})
			}
		} else {
			fields = append(fields, []int{i})
		}
	}
	for _, path := range fields {
		name := typ.FieldByIndex(path).Name
		set := 0
		for run := range 60 {
			var from v1beta1.SidecarContainer
			if run%2 == 0 {
				from = g.sidecar("s", false)
			} else {
				randomobjects.Filler(t, int64(run)).Fill(&from)
			}
			value := reflect.ValueOf(from).FieldByIndex(path)
			if value.IsZero() {
				continue
			}
			set++
			plain := sc("s", "img:1", "")
			reflect.ValueOf(&plain).Elem().FieldByIndex(path).Set(value)
			if readsPod(&plain) || isHotUpgrade(&plain) {
				continue
			}
			ss := newSidecarSet("ss", "h1")
			ss.Spec.Containers = []v1beta1.SidecarContainer{plain}
			prepared := func() *corev1.Container {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s, run %d: readsPod lets it through, but building it without a pod panics: %v", name, run, r)
					}
				}()
				return Prepare(ss).containers[0]
			}()
			for i, pod := range pods {
				b, err := newBuilder(pod, []*v1beta1.SidecarSet{ss}, metav1.NewTime(testNow), false)
				if err != nil {
					t.Fatalf("%s, run %d: %v", name, run, err)
				}
				own := ownCopy(&ss.Spec.Containers[0])
				err = b.build(ss, "spec.containers", 0, &own)
				switch {
				case prepared == nil && err == nil:
					t.Fatalf("%s, run %d, pod %d: not built without a pod, built for one", name, run, i)
				case prepared != nil && (err != nil || !reflect.DeepEqual(*prepared, own.Container)):
					t.Fatalf("%s, run %d, pod %d: readsPod lets it through, but it reads the pod (error %v):\nprepared %s\nbuilt    %s",
						name, run, i, err, mustJSON(t, prepared), mustJSON(t, own.Container))
				}
			}
		}
		if set == 0 {
			t.Errorf("%s: never set", name)
		}
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
