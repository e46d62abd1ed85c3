package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// The probe's value (issue 35 item 2): no label value, though spec.customVersion becomes one.
const notALabelValue = "not a label value!"

// Issue 35 item 2: a v1beta1 SidecarSet whose spec.customVersion is no label value is refused. One
// stored before that was refused — written here to etcd, past admission and the schema — no
// longer breaks v1alpha1: the list and the object read as v1alpha1, the controller registers its
// revision without the label and says why once, a write that keeps the value is refused by the
// webhook, and one that fixes it labels the revision.
func TestCustomVersionIsALabelValue(t *testing.T) {
	refused := sidecarSet("e2e-cv-refused", map[string]string{"app": "cv-refused"}, "cv-refused",
		func(ss *v1beta1.SidecarSet) { ss.Spec.CustomVersion = notALabelValue })
	err := cluster.Client.Create(ctx(t), refused)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.customVersion")

	const name = "e2e-cv-stored"
	failedRounds := reconcileErrors(t)
	stored := sidecarSet(name, map[string]string{"app": name}, name, func(ss *v1beta1.SidecarSet) { ss.Spec.CustomVersion = notALabelValue })
	require.NoError(t, defaults.SidecarSetAndHash(stored))
	storeAsIs(t, stored)

	var alphas v1alpha1.SidecarSetList
	require.NoError(t, cluster.Client.List(ctx(t), &alphas), "one stored object must not fail every v1alpha1 list")
	var alpha *v1alpha1.SidecarSet
	for i := range alphas.Items {
		if alphas.Items[i].Name == name {
			alpha = &alphas.Items[i]
		}
	}
	require.NotNil(t, alpha, "listed as v1alpha1")
	assert.NotContains(t, alpha.Labels, v1alpha1.SidecarSetCustomVersionLabel)
	assert.JSONEq(t, `{"customVersion":"not a label value!"}`, alpha.Annotations[v1alpha1.V1beta1FieldsAnnotation])
	out, err := exec.Command("kubectl", "--kubeconfig", cluster.Kubeconfig, "get", "sidecarsets.v1alpha1.apps.kruise.io").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), name)

	revision := func() (*appsv1.ControllerRevision, error) {
		var l appsv1.ControllerRevisionList
		if err := cluster.Client.List(ctx(t), &l, client.InNamespace(devcluster.Namespace), client.MatchingLabels{v1beta1.SidecarSetNameLabel: name}); err != nil {
			return nil, err
		}
		if len(l.Items) != 1 {
			return nil, fmt.Errorf("%d ControllerRevisions", len(l.Items))
		}
		return &l.Items[0], nil
	}
	eventually(t, "the revision registered without the label", func() error {
		cr, err := revision()
		if err != nil {
			return err
		}
		if v, ok := cr.Labels[v1beta1.SidecarSetCustomVersionLabel]; ok {
			return fmt.Errorf("labelled %q", v)
		}
		return nil
	})
	eventually(t, "an InvalidCustomVersion Event", func() error {
		if n := len(eventsOf(t, name, controller.ReasonInvalidCustomVersion)); n == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	// Rounds go on (the manager counts every SidecarSet again every two seconds), and none fails:
	// the reason is said once, and no round is retried.
	time.Sleep(5 * time.Second)
	evs := eventsOf(t, name, controller.ReasonInvalidCustomVersion)
	require.Len(t, evs, 1)
	assert.Nil(t, evs[0].Series, "said once, not repeated")
	assert.Equal(t, "Warning", evs[0].Type)
	assert.Equal(t, failedRounds, reconcileErrors(t), "no failed round")

	// The schema lets an unchanged value through (CRD validation ratcheting); the webhook does not,
	// and says what to fix.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var beta v1beta1.SidecarSet
		if err := cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &beta); err != nil {
			return err
		}
		metav1.SetMetaDataAnnotation(&beta.ObjectMeta, "e2e.example.com/touched", "yes")
		return cluster.Client.Update(ctx(t), &beta)
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.customVersion")
	assert.Contains(t, err.Error(), "a valid label must be", "the webhook's answer, not the schema's")

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var beta v1beta1.SidecarSet
		if err := cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &beta); err != nil {
			return err
		}
		beta.Spec.CustomVersion = "v1"
		return cluster.Client.Update(ctx(t), &beta)
	}))
	eventually(t, "the revision labelled once spec.customVersion is fixed", func() error {
		cr, err := revision()
		if err != nil {
			return err
		}
		if v := cr.Labels[v1beta1.SidecarSetCustomVersionLabel]; v != "v1" {
			return fmt.Errorf("labelled %q", v)
		}
		return nil
	})
}

// Issue 35 item 5: the namespaceSelector a v1alpha1 client writes beside spec.namespace scopes
// nothing but is given back to v1alpha1 readers, so one that is no selector is refused; a
// conversion annotation written by hand that does not describe the spec is refused; v1alpha1
// lists keep working.
func TestConversionAnnotationHoldsWhatItCarries(t *testing.T) {
	alpha := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-carried"},
		Spec: v1alpha1.SidecarSetSpec{
			Namespace:         "e2e-carried",
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}}},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "carried"}},
			Containers:        sidecarSet("x", nil, "carried").Spec.Containers,
		},
	}
	err := cluster.Client.Create(ctx(t), alpha.DeepCopy())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.namespaceSelector.matchExpressions[0].values")

	alpha.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	written := alpha.DeepCopy()
	require.NoError(t, cluster.Client.Create(ctx(t), written))
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), written) })
	assert.Equal(t, alpha.Spec.NamespaceSelector, written.Spec.NamespaceSelector, "a selector is given back as written")

	handWritten := sidecarSet("e2e-hand-written", map[string]string{"app": "hand-written"}, "hand-written", func(ss *v1beta1.SidecarSet) {
		ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
		ss.Annotations = map[string]string{v1alpha1.V1alpha1FieldsAnnotation: `{"namespace":"e2e-carried","namespaceSelector":{"matchLabels":{"env":"prod"}}}`}
	})
	err = cluster.Client.Create(ctx(t), handWritten)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metadata.annotations[conversion.sidecarops.io/v1alpha1-fields]")
	assert.Contains(t, err.Error(), "does not describe spec.namespaceSelector")

	var alphas v1alpha1.SidecarSetList
	require.NoError(t, cluster.Client.List(ctx(t), &alphas))
}

// storeAsIs writes ss to etcd under the key the API server keeps it at, as JSON (how custom
// resources are stored): an object stored before the validation it fails existed, which no write
// through the API server can make any more. It is deleted, through the API server, when the test ends.
func storeAsIs(t *testing.T, ss *v1beta1.SidecarSet) {
	t.Helper()
	obj := ss.DeepCopy()
	obj.APIVersion, obj.Kind = v1beta1.GroupVersion.String(), "SidecarSet"
	obj.UID, obj.Generation, obj.CreationTimestamp = uuid.NewUUID(), 1, metav1.Now()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	key := "/registry/" + v1beta1.GroupVersion.Group + "/sidecarsets/" + obj.Name
	body, err := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString(raw),
	})
	require.NoError(t, err)
	// etcd's gRPC gateway: no etcd client library needed for one put.
	resp, err := http.Post(cluster.Env.ControlPlane.Etcd.URL.String()+"/v3/kv/put", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", answer)
	t.Cleanup(func() {
		_ = cluster.Client.Delete(ctx(t), &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: obj.Name}})
	})
	eventually(t, obj.Name+" seen by the API server", func() error {
		return cluster.Client.Get(ctx(t), client.ObjectKey{Name: obj.Name}, &v1beta1.SidecarSet{})
	})
}

// eventsOf are the Events with reason about the object named regarding.
func eventsOf(t *testing.T, regarding, reason string) []eventsv1.Event {
	t.Helper()
	var l eventsv1.EventList
	require.NoError(t, cluster.Client.List(ctx(t), &l))
	var out []eventsv1.Event
	for _, e := range l.Items {
		if e.Regarding.Name == regarding && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// reconcileErrors is how many rounds of the SidecarSet controller have failed in this process.
func reconcileErrors(t *testing.T) float64 {
	t.Helper()
	return labelledMetricValue(t, "controller_runtime_reconcile_errors_total", "controller", controller.Name)
}
