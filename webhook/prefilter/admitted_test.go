package prefilter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	admissionv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
)

// union of two conditions is their disjunction as the API server evaluates it, conditions of the
// ternary form (pods without labels) included.
func TestUnionIsTheDisjunction(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	values := []string{"a", "b", "c"}
	sets := []*v1beta1.SidecarSet{
		sidecarSet("in", matchLabels("app", "a")),
		sidecarSet("notin", expression("app", metav1.LabelSelectorOpNotIn, "b")),
		sidecarSet("absent", expression("tier", metav1.LabelSelectorOpDoesNotExist)),
		sidecarSet("two", matchLabels("app", "c", "tier", "b")),
		sidecarSet("scoped", matchLabels("tier", "a"), func(ss *v1beta1.SidecarSet) { ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed("x") }),
	}
	for i, a := range sets {
		for _, b := range sets[i+1:] {
			ea, eb := termOf(a), termOf(b)
			both, ua, ub := newAPIServer(t, union(ea, eb)), newAPIServer(t, ea), newAPIServer(t, eb)
			for range 40 {
				labels := map[string]string{}
				for _, k := range []string{"app", "tier"} {
					if rng.IntN(3) > 0 {
						labels[k] = values[rng.IntN(3)]
					}
				}
				if rng.IntN(5) == 0 {
					labels = nil
				}
				ns := []string{"x", "y"}[rng.IntN(2)]
				p := labelled(labels)
				want := ua.calls(t, ns, p) || ub.calls(t, ns, p)
				require.Equal(t, want, both.calls(t, ns, p), "%s ∪ %s on %v in %s", a.Name, b.Name, labels, ns)
			}
		}
	}
}

func TestUnion(t *testing.T) {
	long := fmt.Sprintf("%q in object.metadata.labels", string(make([]byte, MaxExpressionLength/2)))
	tests := []struct {
		name  string
		exprs []string
		want  string
	}{
		{"nothing", nil, "false"},
		{"false is dropped", []string{"false", "a"}, "a"},
		{"true absorbs", []string{"a", "true", "b"}, "true"},
		{"repeats once", []string{"a", "a"}, "a"},
		{"each term parenthesized", []string{"x ? a : b", "c"}, "(x ? a : b) || (c)"},
		{"over the limit: no condition", []string{long, long + " "}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, union(tt.exprs...))
		})
	}
}

// merged keeps admitted terms for the grace period whatever the elected replica's own view, and
// looks again when the first one expires.
func TestMerged(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	grace := time.Minute
	fresh := Admitted{SidecarSet: "new", Expression: "n", At: now.Add(-10 * time.Second)}
	fresher := Admitted{SidecarSet: "newer", Expression: "m", At: now.Add(-time.Second)}
	stale := Admitted{SidecarSet: "old", Expression: "o", At: now.Add(-grace)}
	tests := []struct {
		name     string
		computed string
		admitted []Admitted
		seen     map[string]string
		want     string
		keep     []Admitted
		requeue  time.Duration
	}{
		{name: "nothing admitted", computed: "c", want: "c"},
		{name: "a term the cache does not have yet", computed: "c", admitted: []Admitted{fresh}, want: "(c) || (n)", keep: []Admitted{fresh}, requeue: 50 * time.Second},
		{name: "expired terms go", computed: "c", admitted: []Admitted{stale, fresher, fresh}, want: "((c) || (m)) || (n)", keep: []Admitted{fresher, fresh}, requeue: 50 * time.Second},
		{name: "the cache has the admitted version: dropped", computed: "n", admitted: []Admitted{fresh}, seen: map[string]string{"new": "n"}, want: "n"},
		{name: "the cache has another version: kept", computed: "c", admitted: []Admitted{fresh}, seen: map[string]string{"new": "c"}, want: "(c) || (n)", keep: []Admitted{fresh}, requeue: 50 * time.Second},
		{name: "unfiltered stays so, terms kept", computed: "", admitted: []Admitted{fresh}, want: "", keep: []Admitted{fresh}, requeue: 50 * time.Second},
		{name: "a term sending every pod", computed: "c", admitted: []Admitted{{SidecarSet: "*", Expression: "true", At: now}}, want: "true", keep: []Admitted{{SidecarSet: "*", Expression: "true", At: now}}, requeue: grace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expr, keep, requeue := merged(tt.computed, tt.admitted, tt.seen, now, grace)
			assert.Equal(t, tt.want, expr)
			assert.Equal(t, tt.keep, keep)
			assert.Equal(t, tt.requeue, requeue)
		})
	}
}

func TestTermOf(t *testing.T) {
	paused := sidecarSet("paused", matchLabels("app", "a"), func(ss *v1beta1.SidecarSet) { ss.Spec.InjectionStrategy.Paused = true })
	assert.Equal(t, "false", termOf(paused), "injects nowhere: nothing to widen")
	assert.Equal(t, "true", termOf(sidecarSet("odd", expression("app", "Matches", "a"))), "inexpressible: every pod")
}

// registration is one MutatingWebhookConfiguration as the API server keeps it under the
// prefilter's applies — its condition, object selector and annotation replaced by what is applied,
// a write conditional on the resourceVersion, a write that changes nothing not counted — beside a
// fleet of SidecarSets: a Widener's Reader and Writer, and a Reconciler's Client.
type registration struct {
	client.Client // unset: only the methods below are called
	mu            sync.Mutex
	cfg           admissionregv1.MutatingWebhookConfiguration
	sets          []v1beta1.SidecarSet
	writes        int
}

func newRegistration(managedFields ...metav1.ManagedFieldsEntry) *registration {
	return &registration{cfg: admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecarops", ResourceVersion: "1", ManagedFields: managedFields},
		Webhooks:   []admissionregv1.MutatingWebhook{{Name: "mpod.sidecarops.io"}},
	}}
}

func (r *registration) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cfg.DeepCopyInto(obj.(*admissionregv1.MutatingWebhookConfiguration))
	return nil
}

func (r *registration) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*v1beta1.SidecarSetList).Items = slices.Clone(r.sets)
	return nil
}

func (r *registration) Apply(_ context.Context, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
	ac := obj.(*admissionv1ac.MutatingWebhookConfigurationApplyConfiguration)
	r.mu.Lock()
	defer r.mu.Unlock()
	if ac.ResourceVersion != nil && *ac.ResourceVersion != r.cfg.ResourceVersion {
		return apierrors.NewConflict(admissionregv1.Resource("mutatingwebhookconfigurations"), r.cfg.Name, errors.New("the object has been modified"))
	}
	raw, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	var applied admissionregv1.MutatingWebhookConfiguration
	if err := json.Unmarshal(raw, &applied); err != nil {
		return err
	}
	next := r.cfg.DeepCopy()
	next.Webhooks[0].MatchConditions = applied.Webhooks[0].MatchConditions
	if !selectorOwnedByOthers(next, next.Webhooks[0].Name) {
		next.Webhooks[0].ObjectSelector = applied.Webhooks[0].ObjectSelector
	}
	delete(next.Annotations, AdmittedAnnotation)
	if v, ok := applied.Annotations[AdmittedAnnotation]; ok {
		next.Annotations = map[string]string{AdmittedAnnotation: v}
	}
	if apiequality.Semantic.DeepEqual(next, &r.cfg) {
		return nil
	}
	r.writes++
	next.ResourceVersion = strconv.Itoa(r.writes + 1)
	r.cfg = *next
	return nil
}

func (r *registration) filter() Filter {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, _ := Registered(&r.cfg, r.cfg.Webhooks[0].Name)
	return f
}

// The elected replica renders the admitted terms as the widenings wrote them, so that a reconcile
// after any widening writes nothing: on a real API server it wrote back every widening it saw, 9
// of the 26 writes a 30-second flood made (issue 35, item 7). Expired terms, and the terms of
// SidecarSets its cache has, are the reconciler's to drop: one write each time.
func TestReconcileWritesNoWideningBack(t *testing.T) {
	const grace = 2 * time.Minute
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	web := *sidecarSet("web", matchLabels("app", "web"))
	admin := metav1.ManagedFieldsEntry{Manager: "helm", FieldsV1: metav1.NewFieldsV1(`{"f:webhooks":{"k:{\"name\":\"mpod.sidecarops.io\"}":{"f:objectSelector":{}}}}`)}
	for name, reg := range map[string]*registration{
		"the prefilter's selector":    newRegistration(),
		"an administrator's selector": newRegistration(admin),
	} {
		t.Run(name, func(t *testing.T) {
			if len(reg.cfg.ManagedFields) > 0 {
				reg.cfg.Webhooks[0].ObjectSelector = expression("sidecarops.io/skip", metav1.LabelSelectorOpDoesNotExist)
			}
			reg.sets = []v1beta1.SidecarSet{web}
			now := start
			clock := func() time.Time { return now }
			r := &Reconciler{Client: reg, Configuration: "sidecarops", Webhook: "mpod.sidecarops.io", Grace: grace, Now: clock}
			reconcile := func() {
				t.Helper()
				_, err := r.Reconcile(context.Background(), reconcile.Request{})
				require.NoError(t, err)
			}
			w := &Widener{Reader: reg, Writer: reg, Configuration: "sidecarops", Webhook: "mpod.sidecarops.io", Grace: grace, Burst: 5, Interval: time.Hour, Now: clock}
			reconcile()
			written := reg.writes
			widen := func(ss *v1beta1.SidecarSet, writes int) {
				t.Helper()
				require.NoError(t, w.Widen(context.Background(), ss, nil))
				require.Equal(t, written+writes, reg.writes, "writes widening for %s", ss.Name)
				written = reg.writes
				reconcile()
				require.Equal(t, written, reg.writes, "the reconciler wrote back the widening for %s: %s", ss.Name, reg.filter().Expression)
			}
			widen(sidecarSet("a", matchLabels("app", "a")), 1)
			widen(sidecarSet("b", matchLabels("tier", "b")), 1)
			widen(sidecarSet("unlabelled", expression("app", metav1.LabelSelectorOpDoesNotExist)), 1)
			now = now.Add(grace / 4)
			widen(sidecarSet("a", matchLabels("app", "a")), 0) // covered for more than half the grace
			now = now.Add(grace / 2)
			widen(sidecarSet("a", matchLabels("app", "a")), 1) // refreshed in place
			expr := reg.filter().Expression
			for _, v := range []string{`"web"`, `"a"`, `"b"`, `!("app" in`} {
				assert.Contains(t, expr, v)
			}
			widen(sidecarSet("c", matchLabels("app", "c")), 1) // past the burst: every pod
			assert.Equal(t, "true", reg.filter().Expression)
			widen(sidecarSet("d", matchLabels("app", "d")), 0)

			// The collapse expires, unrefreshed: the reconciler's own view again, written once.
			now = now.Add(grace)
			reconcile()
			assert.Equal(t, written+1, reg.writes)
			assert.NotContains(t, reg.filter().CEL(), `"a"`)
			assert.Contains(t, reg.filter().CEL(), `"web"`)
			written = reg.writes
			reconcile()
			assert.Equal(t, written, reg.writes)
		})
	}
}

// A flood spends each replica's burst, then one collapse is written for all of them, refreshed
// once per half grace while the flood goes on: a replica whose rate is untouched does not write
// its own terms past a collapse another one wrote.
func TestWideningsOfTwoReplicas(t *testing.T) {
	const grace, burst = 2 * time.Minute, 4
	reg := newRegistration()
	reg.cfg.Webhooks[0].MatchConditions = []admissionregv1.MatchCondition{{Name: podwebhook.ConditionName, Expression: "false"}}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	replica := func() *Widener {
		return &Widener{Reader: reg, Writer: reg, Configuration: "sidecarops", Webhook: "mpod.sidecarops.io", Grace: grace, Burst: burst, Now: func() time.Time { return now }}
	}
	first, second := replica(), replica()
	n := 0
	flood := func(w *Widener, reviews int) {
		t.Helper()
		for range reviews {
			n++
			require.NoError(t, w.Widen(context.Background(), sidecarSet(fmt.Sprintf("made-up-%d", n), matchLabels("app", strconv.Itoa(n))), nil))
		}
	}
	flood(first, 100)
	assert.Equal(t, burst+1, reg.writes, "the burst and one collapse")
	flood(second, 100)
	assert.Equal(t, burst+1, reg.writes, "a second replica past the collapse")
	for range 5 {
		now = now.Add(grace/2 + time.Second)
		flood(second, 10)
		flood(first, 10)
	}
	assert.Equal(t, burst+1+5, reg.writes, "one write per half grace while the flood goes on")
	assert.Equal(t, Filter{Expression: "true"}, reg.filter())
}

// The deepest condition widenings leave before they send every pod (maxAdmitted terms, each nesting
// the one before) is one the API server accepts and evaluates as their disjunction.
func TestDeepestWidenedCondition(t *testing.T) {
	base, _, _ := Condition([]*v1beta1.SidecarSet{
		sidecarSet("web", matchLabels("app", "web")),
		sidecarSet("unlabelled", expression("tier", metav1.LabelSelectorOpDoesNotExist)),
	})
	terms := make([]string, maxAdmitted)
	for i := range terms {
		terms[i] = termOf(sidecarSet(fmt.Sprintf("s%d", i), matchLabels("app", fmt.Sprintf("a%d", i), "tier", "t")))
	}
	api := newAPIServer(t, widenBy(base, terms...))
	assert.True(t, api.calls(t, "ns", labelled(map[string]string{"app": fmt.Sprintf("a%d", maxAdmitted-1), "tier": "t"})))
	assert.True(t, api.calls(t, "ns", labelled(map[string]string{"app": "web", "tier": "t"})))
	assert.False(t, api.calls(t, "ns", labelled(map[string]string{"app": "other", "tier": "t"})))
}
