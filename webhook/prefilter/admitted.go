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
	"github.com/sidecarops/sidecarops/internal/podwebhook"
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

// widenBy is cond widened by each term in turn, as widenings write it one admission at a time
// (union(union(cond, a), b)…), so that the elected replica, which renders the same terms the same
// way, finds a widened registration already as it wants it and writes nothing back. "" (no
// condition: every pod is sent) stays "".
func widenBy(cond string, terms ...string) string {
	for _, t := range terms {
		if cond == "" {
			break
		}
		cond = union(cond, t)
	}
	return cond
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
	var exprs []string
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
	return widenBy(computed, exprs...), keep, requeue
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
// and while that holds for half the grace or more no replica writes again (this one does not even
// read). A widening whose SidecarSet is covered that long already writes nothing either. The
// condition is written as the elected replica renders it, which therefore writes nothing back. A
// flood of made-up SidecarSets then costs each replica at most its burst of writes, and all of
// them one write per half grace period, and widens nothing that a real SidecarSet's admission
// could not: the direction that costs webhook calls, never sidecars.
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

	// limiter is the rate of widenings, made once, at the first.
	limiterOnce sync.Once
	limiter     *rate.Limiter

	// mu serializes this replica's widenings: SidecarSets applied together (a GitOps sync, a
	// Helm release) are admitted concurrently, and every one of their conditional writes but one
	// would otherwise lose the race each time it is tried. It guards everyPodUntil too.
	mu sync.Mutex
	// everyPodUntil is when the last collapse this replica wrote or read stops covering new
	// widenings: half the grace after it was written, so that its term is refreshed well before
	// it expires.
	everyPodUntil time.Time
}

// widenBackoff spaces the retries of a write that lost a race with another replica's, within the
// webhook's timeout (3 s): about 2.5 s at most.
var widenBackoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 8}

// Widen widens the condition for ss (old is its previous version on an update, else nil). It
// writes nothing when ss can select no pod that old could not, or when what is registered covers
// ss for half the grace period or more.
func (w *Widener) Widen(ctx context.Context, ss, old *v1beta1.SidecarSet) error {
	term := termOf(ss)
	if term == "false" || (old != nil && termOf(old) == term) {
		return nil
	}
	w.limiterOnce.Do(func() {
		w.limiter = rate.NewLimiter(rate.Every(cmp.Or(w.Interval, DefaultWidenInterval)), cmp.Or(w.Burst, DefaultWidenBurst))
	})
	// Spent as reviews arrive, not as they get their turn below: reviews queued behind the burst's
	// writes find the rate spent however long those writes take. Spent even when nothing is
	// written, so that a flood going on past the collapse finds no rate left and collapses again,
	// once, instead of writing a burst of terms.
	everyPod := !w.limiter.AllowN(clock(w.Now), 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	now := clock(w.Now)
	if now.Before(w.everyPodUntil) {
		return nil
	}
	g := grace(w.Grace)
	err := retry.OnError(widenBackoff, apierrors.IsConflict, func() error {
		cfg := &admissionregv1.MutatingWebhookConfiguration{}
		if err := w.Reader.Get(ctx, types.NamespacedName{Name: w.Configuration}, cfg); err != nil {
			return fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", w.Configuration, err)
		}
		current, _, found := ownFilter(cfg, w.Webhook)
		if !found {
			return nil // nothing filters: every pod is sent
		}
		previous, _ := admittedOf(cfg)
		_, admitted, _ := merged("", previous, nil, now, g)
		// A collapse, whichever replica wrote it, is refreshed rather than followed by terms.
		if c := slices.IndexFunc(admitted, func(a Admitted) bool { return a.SidecarSet == collapsed }); c >= 0 {
			if until := admitted[c].At.Add(g / 2); now.Before(until) {
				w.everyPodUntil = until
				return nil
			}
			everyPod = true
		}
		added := term
		switch i := slices.IndexFunc(admitted, func(a Admitted) bool { return a.SidecarSet == ss.Name && a.Expression == term }); {
		case i < 0:
			admitted = append(admitted, Admitted{SidecarSet: ss.Name, Expression: term, At: now.UTC()})
		case now.Before(admitted[i].At.Add(g / 2)):
			return nil
		default:
			// In the condition already, where it keeps its place, as the elected replica renders it.
			admitted[i].At = now.UTC()
			added = "false"
		}
		if everyPod || len(admitted) > maxAdmitted || len(encodeAdmitted(admitted)) > maxAdmittedBytes {
			added = "true"
			admitted = []Admitted{{SidecarSet: collapsed, Expression: added, At: now.UTC()}}
		}
		// No filter ("") means every pod is sent; the term is still recorded, for the elected
		// replica's next filter. A selector cannot say "or": the widened filter is a condition.
		widened := Filter{Expression: widenBy(current.CEL(), added)}
		if err := apply(ctx, w.Writer, w.Configuration, w.Webhook, cfg.ResourceVersion, widened, encodeAdmitted(admitted)); err != nil {
			return err
		}
		if added == "true" {
			w.everyPodUntil = now.Add(g / 2)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("widening the pod webhook's match condition %s for SidecarSet %s: %w", podwebhook.ConditionName, ss.Name, err)
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
