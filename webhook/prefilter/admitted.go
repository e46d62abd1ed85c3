package prefilter

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// AdmittedAnnotation lists, on the webhook configuration, the terms that SidecarSet admission added
// to the condition (JSON, []Admitted). Every replica admits SidecarSets but only the elected one
// recomputes the condition, from a cache that trails the API server: without these terms it would
// drop a SidecarSet admitted a moment ago, and with no leader nobody would add it at all.
const AdmittedAnnotation = "prefilter.sidecarops.io/admitted"

// DefaultGrace is how long an admitted term is kept before the elected replica's own view of the
// SidecarSets must cover it: far above a watch's usual lag, short enough that a SidecarSet refused
// after our admission (by a later webhook) widens the condition only briefly.
const DefaultGrace = 2 * time.Minute

// maxAdmitted bounds the annotation (entries and bytes, well under the API server's 256 KiB for
// all annotations); past it the list collapses into one term that sends every pod for a grace
// period, the direction that can only cost calls, never sidecars.
const (
	maxAdmitted      = 64
	maxAdmittedBytes = 96 << 10
)

// Admitted is one SidecarSet's term added at its admission.
type Admitted struct {
	SidecarSet string    `json:"sidecarSet"`
	Expression string    `json:"expression"`
	At         time.Time `json:"at"`
}

// admittedOf reads the annotation. A value that does not parse is dropped: it can only have been
// written by hand, and the elected replica's next apply rewrites it from the SidecarSets.
func admittedOf(cfg *admissionregv1.MutatingWebhookConfiguration) ([]Admitted, error) {
	raw, ok := cfg.Annotations[AdmittedAnnotation]
	if !ok {
		return nil, nil
	}
	var out []Admitted
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AdmittedAnnotation, err)
	}
	return out, nil
}

// encodeAdmitted is the annotation's value ("" for none: the annotation is then not applied).
func encodeAdmitted(as []Admitted) string {
	if len(as) == 0 {
		return ""
	}
	raw, _ := json.Marshal(as) // strings and times only: cannot fail
	return string(raw)
}

// termOf is the condition of ss alone: "false" when it injects nowhere, "true" when the condition
// cannot express it (every pod must then be sent).
func termOf(ss *v1beta1.SidecarSet) string {
	expr, filter, _ := Condition([]*v1beta1.SidecarSet{ss})
	if !filter {
		return "true"
	}
	return expr
}

// union is the disjunction of conditions, each parenthesized (a condition may be a ternary, which
// binds looser than ||), "" when it would exceed MaxExpressionLength.
func union(exprs ...string) string {
	var terms []string
	for _, e := range exprs {
		switch e {
		case "false":
			continue
		case "true":
			return "true"
		}
		if !slices.Contains(terms, e) {
			terms = append(terms, e)
		}
	}
	var out string
	switch len(terms) {
	case 0:
		out = "false"
	case 1:
		out = terms[0]
	default:
		out = "(" + strings.Join(terms, ") || (") + ")"
	}
	if len(out) > MaxExpressionLength {
		return ""
	}
	return out
}

// merged is the registration the elected replica applies: its own condition (computed, "" for
// none) widened by the admitted terms it keeps in the annotation; and when to look again, so that
// expired terms are dropped. A term is kept for the grace period, or until the replica's cache
// holds that SidecarSet with that very term (seen, by name), from when computed covers it: a
// SidecarSet deleted after that leaves the condition at once.
func merged(computed string, admitted []Admitted, seen map[string]string, now time.Time, grace time.Duration) (expr string, keep []Admitted, requeue time.Duration) {
	exprs := []string{computed}
	for _, a := range admitted {
		left := a.At.Add(grace).Sub(now)
		if t, ok := seen[a.SidecarSet]; left <= 0 || (ok && t == a.Expression) {
			continue
		}
		keep = append(keep, a)
		exprs = append(exprs, a.Expression)
		if requeue == 0 || left < requeue {
			requeue = left
		}
	}
	if computed == "" {
		return "", keep, requeue
	}
	return union(exprs...), keep, requeue
}

// Defaults of the Widener's rate of writes: a burst that covers a GitOps sync or a Helm release
// of SidecarSets one term each, then one per interval. Past the rate, a widening sends every pod
// instead (collapsed), and nothing is written again while that is in force.
const (
	DefaultWidenBurst    = 16
	DefaultWidenInterval = 10 * time.Second
)

// collapsed is the admitted entry that sends every pod: a term too many, or too many widenings.
const collapsed = "*"

// Widener adds an admitted SidecarSet's term to the registered condition before the SidecarSet is
// stored, so the API server sends its pods to the webhook from the moment it exists, whichever
// replica admits it and whether or not a leader is elected.
//
// A review can reach the validating webhook from anyone who can reach its port, not only from the
// API server, and every widening is a write of the registration (decision D9). So widenings are
// rate-limited: past the rate, the condition is widened to every pod for the grace period, once,
// and while that holds nothing more is written or even read. A flood of made-up SidecarSets then
// costs at most a burst of writes and one per half grace period, and widens nothing that a real
// SidecarSet's admission could not: the direction that costs webhook calls, never sidecars.
type Widener struct {
	// Reader reads the registration uncached: the write is conditional on its resourceVersion.
	Reader client.Reader
	// Writer applies the condition.
	Writer        client.Writer
	Configuration string
	Webhook       string
	// Grace is how long an admitted term is kept (0: DefaultGrace); the Reconciler's must be the same.
	Grace time.Duration
	// Burst and Interval are the rate of widenings that each write their own term (0: the
	// defaults).
	Burst    int
	Interval time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	// mu serializes this replica's widenings: SidecarSets applied together (a GitOps sync, a
	// Helm release) are admitted concurrently, and every one of their conditional writes but one
	// would otherwise lose the race each time it is tried. It guards the fields below too.
	mu sync.Mutex
	// limiter is the rate of widenings, made at the first.
	limiter *rate.Limiter
	// everyPodUntil is when this replica's last collapse stops covering new widenings: half the
	// grace after it was written, so that its term is refreshed well before it expires.
	everyPodUntil time.Time
}

// widenBackoff spaces the retries of a write that lost a race with another replica's, within the
// webhook's timeout (3 s): about 2.5 s at most.
var widenBackoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 8}

// Widen widens the condition for ss (old is its previous version on an update, else nil). It
// writes nothing when ss can select no pod that old could not, or when every pod is sent already.
func (w *Widener) Widen(ctx context.Context, ss, old *v1beta1.SidecarSet) error {
	term := termOf(ss)
	if term == "false" || (old != nil && termOf(old) == term) {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := clock(w.Now)
	if w.limiter == nil {
		w.limiter = rate.NewLimiter(rate.Every(cmp.Or(w.Interval, DefaultWidenInterval)), cmp.Or(w.Burst, DefaultWidenBurst))
	}
	// Spent even when nothing is written below, so that a flood going on past the collapse finds
	// no rate left and collapses again, once, instead of writing a burst of terms.
	everyPod := !w.limiter.AllowN(now, 1)
	if now.Before(w.everyPodUntil) {
		return nil
	}
	err := retry.OnError(widenBackoff, apierrors.IsConflict, func() error {
		cfg := &admissionregv1.MutatingWebhookConfiguration{}
		if err := w.Reader.Get(ctx, types.NamespacedName{Name: w.Configuration}, cfg); err != nil {
			return fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", w.Configuration, err)
		}
		current, found := Registered(cfg, w.Webhook)
		if !found {
			return nil // nothing filters: every pod is sent
		}
		previous, _ := admittedOf(cfg)
		_, admitted, _ := merged("", previous, nil, now, grace(w.Grace))
		admitted = append(slices.DeleteFunc(admitted, func(a Admitted) bool {
			return a.SidecarSet == ss.Name && a.Expression == term
		}), Admitted{SidecarSet: ss.Name, Expression: term, At: now.UTC()})
		added := term
		if everyPod || len(admitted) > maxAdmitted || len(encodeAdmitted(admitted)) > maxAdmittedBytes {
			added = "true"
			admitted = []Admitted{{SidecarSet: collapsed, Expression: added, At: now.UTC()}}
		}
		// No filter now means every pod is sent; the term is still recorded, for the elected
		// replica's next filter. A selector cannot say "or": the widened filter is a condition.
		var widened Filter
		if current.Filtered() {
			widened.Expression = union(current.CEL(), added)
		}
		if err := apply(ctx, w.Writer, w.Configuration, w.Webhook, cfg.ResourceVersion, widened, encodeAdmitted(admitted)); err != nil {
			return err
		}
		if added == "true" {
			w.everyPodUntil = now.Add(grace(w.Grace) / 2)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("widening the pod webhook's match condition %s for SidecarSet %s: %w", ConditionName, ss.Name, err)
	}
	return nil
}

func clock(now func() time.Time) time.Time {
	if now == nil {
		return time.Now()
	}
	return now()
}

func grace(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultGrace
	}
	return d
}
