package prefilter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
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
		{name: "expired terms go", computed: "c", admitted: []Admitted{stale, fresher, fresh}, want: "(c) || (m) || (n)", keep: []Admitted{fresher, fresh}, requeue: 50 * time.Second},
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
