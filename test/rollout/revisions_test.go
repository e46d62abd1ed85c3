package rollout

import (
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
)

// revision is a ControllerRevision reduced to what the tests compare.
type revision struct {
	name   string
	number int64
	image  string
	custom string
}

func (f *fleet) revisions() []revision {
	f.t.Helper()
	var l appsv1.ControllerRevisionList
	require.NoError(f.t, cluster.Client.List(testCtx(f.t), &l, client.InNamespace(cmp.Or(cluster.Manager.RevisionNamespace, devcluster.Namespace)),
		client.MatchingLabels{v1beta1.SidecarSetNameLabel: f.name}))
	var out []revision
	for _, cr := range l.Items {
		var data struct {
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		}
		require.NoError(f.t, json.Unmarshal(cr.Data.Raw, &data))
		out = append(out, revision{cr.Name, cr.Revision, data.Spec.Containers[0].Image, cr.Labels[v1beta1.SidecarSetCustomVersionLabel]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].number < out[j].number })
	return out
}

// setImage changes the image (and spec.customVersion with it, when given) and waits until
// the controller has registered the revision.
func (f *fleet) setImage(tag, customVersion string) string {
	f.t.Helper()
	f.update(func(ss *v1beta1.SidecarSet) {
		ss.Spec.Containers[0].Image = image(tag)
		if customVersion != "" {
			ss.Spec.CustomVersion = customVersion
		}
	})
	var latest string
	eventually(f.t, "revision for image "+tag, func() error {
		ss := f.sidecarSet()
		if ss.Status.ObservedGeneration != ss.Generation {
			return fmt.Errorf("generation %d not observed", ss.Generation)
		}
		for _, r := range f.revisions() {
			if r.name == ss.Status.LatestRevision && r.image == image(tag) {
				latest = r.name
				return nil
			}
		}
		return fmt.Errorf("latestRevision %q does not record %s", ss.Status.LatestRevision, image(tag))
	})
	return latest
}

func numbersAndImages(revs []revision) []string {
	var out []string
	for _, r := range revs {
		out = append(out, fmt.Sprintf("%d:%s", r.number, r.image))
	}
	return out
}

// TestRevisionHistory: the history limit, rollback renumbering without a new object, and the
// names (compat §1.10, compat §3.10, compat §4.6 C10, compat §4.8 E4).
func TestRevisionHistory(t *testing.T) {
	limit := int32(3)
	f := newFleet(t, "history", 0, func(ss *v1beta1.SidecarSet) { ss.Spec.RevisionHistoryLimit = &limit }, nil)
	first := f.setImage("1", "")
	assert.Regexp(t, `^history-[0-9a-z]+$`, first)
	names := map[string]string{}
	for _, tag := range []string{"2", "3", "4", "5", "6"} {
		names[tag] = f.setImage(tag, "")
	}
	eventually(t, "history truncated to the limit", func() error {
		if got := numbersAndImages(f.revisions()); len(got) != int(limit) {
			return fmt.Errorf("revisions %v", got)
		}
		return nil
	})
	assert.Equal(t, []string{"4:" + image("4"), "5:" + image("5"), "6:" + image("6")}, numbersAndImages(f.revisions()))

	// Rolling back to image 5 renumbers its revision instead of creating one.
	assert.Equal(t, names["5"], f.setImage("5", ""), "the old revision object is reused")
	assert.Equal(t, []string{"4:" + image("4"), "6:" + image("6"), "7:" + image("5")}, numbersAndImages(f.revisions()))
}

// TestInjectionFromHistoricalRevisions: injectionStrategy.revision by customVersion and by
// revisionName picks the stored revision for new pods; unpausing then upgrades them in place to
// the latest (compat §4.8 E6).
func TestInjectionFromHistoricalRevisions(t *testing.T) {
	f := newFleet(t, "versions", 0, func(ss *v1beta1.SidecarSet) { ss.Spec.UpdateStrategy.Paused = true }, nil)
	rev := map[string]string{}
	for _, v := range []string{"0", "1", "2"} {
		rev[v] = f.setImage("v"+v, v)
	}
	for _, r := range f.revisions() {
		if r.custom != "" { // the revision of the SidecarSet as created has none
			assert.Equal(t, r.image, image("v"+r.custom), "revision %s carries its custom version label", r.name)
		}
	}

	custom := "1"
	f.update(func(ss *v1beta1.SidecarSet) {
		ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: &custom, Policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy}
	})
	p := f.pod(0, nil)
	eventually(t, "injection by customVersion", func() error {
		probe := p.DeepCopy()
		if err := cluster.Client.Create(testCtx(t), probe, client.DryRunAll); err != nil {
			return err
		}
		if got := specImage(probe, sidecar); got != image("v1") {
			return fmt.Errorf("injected %q (hash annotation %s)", got, probe.Annotations[v1beta1.SidecarSetHashAnnotation])
		}
		return nil
	})
	require.NoError(t, cluster.Client.Create(testCtx(t), p))
	f.waitStatus(counts{1, 0, 1, 0})
	pod := f.list()[0]
	assert.Equal(t, image("v1"), specImage(pod, sidecar))
	assert.Equal(t, rev["1"], podRevision(t, pod, "versions"), "the pod records the revision it was injected from")

	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.UpdateStrategy.Paused = false })
	f.waitStatus(counts{1, 1, 1, 1})
	pod = f.list()[0]
	assert.Equal(t, image("v2"), specImage(pod, sidecar), "unpaused: upgraded to the latest")
	assert.Equal(t, rev["2"], podRevision(t, pod, "versions"))

	name := rev["0"]
	f.update(func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.Paused = true
		ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: &name, Policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy}
	})
	p = f.pod(1, nil)
	eventually(t, "injection by revisionName", func() error {
		probe := p.DeepCopy()
		if err := cluster.Client.Create(testCtx(t), probe, client.DryRunAll); err != nil {
			return err
		}
		if got := specImage(probe, sidecar); got != image("v0") {
			return fmt.Errorf("injected %q", got)
		}
		return nil
	})
	require.NoError(t, cluster.Client.Create(testCtx(t), p))
	f.waitStatus(counts{2, 1, 2, 1})
	for _, got := range f.list() {
		if got.Name == p.Name {
			assert.Equal(t, rev["0"], podRevision(t, got, "versions"))
		}
	}
}

// TestRevisionNamespace: with --revision-namespace the history is kept there (an OpenKruise's
// kruise-system when taking it over) and read from there: a rollout records its revisions there
// and nowhere else, and injection from a historical revision finds it there.
func TestRevisionNamespace(t *testing.T) {
	ctx := testCtx(t)
	require.NoError(t, cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kruise-system"}}))
	cluster.Manager.RevisionNamespace = "kruise-system"
	require.NoError(t, cluster.RestartManager(ctx))
	t.Cleanup(func() {
		cluster.Manager.RevisionNamespace = ""
		require.NoError(t, cluster.RestartManager(testCtx(t)))
	})

	f := newFleet(t, "elsewhere", 2, nil, nil)
	first := f.setImage("1", "")
	f.setImage("2", "")
	f.waitStatus(counts{matched: 2, updated: 2, ready: 2, updatedReady: 2})
	assert.Equal(t, []string{"1:" + image("1"), "2:" + image("2")}, numbersAndImages(f.revisions()))
	var mine appsv1.ControllerRevisionList
	require.NoError(t, cluster.Client.List(ctx, &mine, client.InNamespace(devcluster.Namespace), client.MatchingLabels{v1beta1.SidecarSetNameLabel: f.name}))
	assert.Empty(t, mine.Items, "nothing in the manager's own namespace")

	f.update(func(ss *v1beta1.SidecarSet) {
		ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: &first}
	})
	eventually(t, "new pods get the revision kept in kruise-system", func() error {
		p := f.pod(99, nil)
		if err := cluster.Client.Create(ctx, p, client.DryRunAll); err != nil {
			return err
		}
		if got := specImage(p, sidecar); got != image("1") {
			return fmt.Errorf("injected %s", got)
		}
		return nil
	})
}
