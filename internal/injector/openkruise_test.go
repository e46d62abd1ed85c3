package injector

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/mutation"
)

// openKruiseWebhook is OpenKruise's pod webhook as path B keeps it, for the SidecarSets it knows
// (kruise): its SidecarSet injection, which is byte-identical to sidecarops' own (the project's
// parity suite holds the two to it) but recorded at an earlier moment, and then container launch
// priority for a pod annotated Ordered (reference §8.2): container i gets priority -i and the
// barrier env naming key p_<priority> of ConfigMap <pod>-barrier.
func openKruiseWebhook(t *testing.T, kruise *engine.Snapshot, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	earlier := &mutation.Injector{Now: func() time.Time { return time.Unix(1600000000, 0) }, Rand: func() float64 { return 0 }}
	res, err := Pod(context.Background(), kruise, earlier, PodRequest{Pod: p.DeepCopy()})
	require.NoError(t, err)
	out := res.Pod.DeepCopy()
	if out.Annotations["apps.kruise.io/container-launch-priority"] == "Ordered" {
		for i := range out.Spec.Containers {
			out.Spec.Containers[i].Env = append(out.Spec.Containers[i].Env, corev1.EnvVar{
				Name: "KRUISE_CONTAINER_BARRIER",
				ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: out.Name + "-barrier"},
					Key:                  fmt.Sprintf("p_%d", -i),
				}},
			})
		}
	}
	return out
}

// afterKruise answers received as the pod webhook does with --openkruise-kept, and returns the pod
// its patch makes of received.
func afterKruise(t *testing.T, snap *engine.Snapshot, received *corev1.Pod) (*corev1.Pod, PodResult) {
	t.Helper()
	raw, err := json.Marshal(received)
	require.NoError(t, err)
	res, err := AfterOpenKruise(context.Background(), snap, fixedInjector, PodRequest{Pod: received.DeepCopy(), Raw: raw, Decoded: true, PatchOnly: true})
	require.NoError(t, err)
	patchJSON, err := json.Marshal(res.Patch)
	require.NoError(t, err)
	patch, err := jsonpatch.DecodePatch(patchJSON)
	require.NoError(t, err)
	patched, err := patch.Apply(raw)
	require.NoError(t, err, "the answer's patch applies to the pod as received")
	out := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(patched, out))
	return out, res
}

func TestAfterOpenKruise(t *testing.T) {
	withSecret := func(ss *v1beta1.SidecarSet) {
		ss.Spec.Volumes = []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "mesh-certs"}}}}
		ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "certs", MountPath: "/certs"}}
	}
	mesh := sidecarSet(t, "mesh", "web", withSecret)
	log := sidecarSet(t, "log", "web")
	meshV2 := sidecarSet(t, "mesh", "web", withSecret, func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = "busybox:2" })
	ordered := func(labels map[string]string) *corev1.Pod {
		return pod("shop", labels, func(p *corev1.Pod) {
			p.Annotations = map[string]string{"apps.kruise.io/container-launch-priority": "Ordered"}
		})
	}
	web := map[string]string{"app": "web"}
	blocked := map[string]string{"app": "web", "block": "yes"}

	for _, tc := range []struct {
		name           string
		kruise, ours   *engine.Snapshot
		pod            *corev1.Pod
		unchanged      bool
		sidecarSets    []string // in the hash annotation of the answer
		containers     []string
		barrierOn      []string // containers keeping OpenKruise's launch-priority barrier
		volumes        []string
		outcome        Outcome
		injectedByOurs []string
	}{
		{name: "both inject the same: the pod stays as OpenKruise's webhook left it, launch priority included",
			kruise: snapshotOf(t, nil, mesh), ours: snapshotOf(t, nil, mesh), pod: ordered(web), unchanged: true,
			sidecarSets: []string{"mesh"}, containers: []string{"mesh-c", "app"}, barrierOn: []string{"mesh-c", "app"}, volumes: []string{"certs"},
			outcome: Injected, injectedByOurs: []string{"mesh"}},
		{name: "a gate vetoes the pod: OpenKruise's injection is taken back, its Secret volume with it",
			kruise: snapshotOf(t, nil, mesh), ours: snapshotOf(t, []*bundle.Bundle{gates(t)}, mesh), pod: ordered(blocked),
			containers: []string{"app"}, barrierOn: []string{"app"}, outcome: Gated},
		{name: "a SidecarSet OpenKruise does not know is added; its own stays as it left it",
			kruise: snapshotOf(t, nil, mesh), ours: snapshotOf(t, nil, mesh, log), pod: ordered(web),
			sidecarSets: []string{"log", "mesh"}, containers: []string{"log-c", "mesh-c", "app"}, barrierOn: []string{"mesh-c", "app"},
			volumes: []string{"certs"}, outcome: Injected, injectedByOurs: []string{"log", "mesh"}},
		{name: "another version of a SidecarSet: sidecarops' replaces OpenKruise's",
			kruise: snapshotOf(t, nil, mesh), ours: snapshotOf(t, nil, meshV2), pod: ordered(web),
			sidecarSets: []string{"mesh"}, containers: []string{"mesh-c", "app"}, barrierOn: []string{"app"}, volumes: []string{"certs"},
			outcome: Injected, injectedByOurs: []string{"mesh"}},
		{name: "a SidecarSet that no longer selects the pod is taken back, the other's records stay",
			kruise: snapshotOf(t, nil, mesh, log), ours: snapshotOf(t, nil, sidecarSet(t, "mesh", "other", withSecret), log), pod: ordered(web),
			sidecarSets: []string{"log"}, containers: []string{"log-c", "app"}, barrierOn: []string{"log-c", "app"},
			outcome: Injected, injectedByOurs: []string{"log"}},
		// Both read the same API server, so this is a moment's race (a SidecarSet just created, or
		// just deleted): OpenKruise alone would have injected it all the same.
		{name: "a SidecarSet sidecarops does not hold is left as OpenKruise injected it",
			kruise: snapshotOf(t, nil, mesh, log), ours: snapshotOf(t, nil, log), pod: ordered(web),
			sidecarSets: []string{"log", "mesh"}, containers: []string{"log-c", "mesh-c", "app"}, barrierOn: []string{"log-c", "mesh-c", "app"},
			volumes: []string{"certs"}, outcome: Injected, injectedByOurs: []string{"log"}},
		{name: "nothing of OpenKruise's: answered as alone",
			kruise: snapshotOf(t, nil), ours: snapshotOf(t, nil, mesh), pod: pod("shop", web),
			sidecarSets: []string{"mesh"}, containers: []string{"mesh-c", "app"}, volumes: []string{"certs"}, outcome: Injected, injectedByOurs: []string{"mesh"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			received := openKruiseWebhook(t, tc.kruise, tc.pod)
			out, res := afterKruise(t, tc.ours, received)
			assert.Equal(t, tc.outcome, res.Outcome)
			assert.Equal(t, tc.injectedByOurs, orNil(res.Injected))
			if tc.unchanged {
				assert.Empty(t, res.Patch, "nothing to change in what OpenKruise's webhook did")
			}
			var names, barriers, volumes []string
			for _, c := range out.Spec.Containers {
				names = append(names, c.Name)
				for _, e := range c.Env {
					if e.Name == "KRUISE_CONTAINER_BARRIER" {
						barriers = append(barriers, c.Name)
					}
				}
			}
			for _, v := range out.Spec.Volumes {
				volumes = append(volumes, v.Name)
			}
			assert.Equal(t, tc.containers, names)
			assert.Equal(t, tc.barrierOn, barriers)
			assert.Equal(t, tc.volumes, volumes)
			specs, err := v1beta1.ParseUpgradeSpecs(out.Annotations[v1beta1.SidecarSetHashAnnotation])
			require.NoError(t, err)
			var recorded []string
			for name := range specs {
				recorded = append(recorded, name)
			}
			assert.ElementsMatch(t, tc.sidecarSets, recorded)
			if tc.sidecarSets == nil {
				assert.NotContains(t, out.Annotations, v1beta1.SidecarSetListAnnotation)
				assert.NotContains(t, out.Annotations, v1beta1.SidecarSetHashWithoutImageAnnotation)
			}
			if tc.injectedByOurs != nil {
				for name, spec := range specs {
					ss, ok := tc.ours.SidecarSet(name)
					if !ok {
						ss, ok = tc.kruise.SidecarSet(name)
					}
					require.True(t, ok)
					assert.Equal(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation], spec.Hash, "the hash of sidecarops' SidecarSet %s", name)
				}
			}

			// The API server calls the webhook again when a later one changes the pod: the answer
			// is then nothing more.
			again, res2 := afterKruise(t, tc.ours, out)
			assert.Empty(t, res2.Patch, "a second call changes nothing")
			assert.Equal(t, out, again)
		})
	}
}
