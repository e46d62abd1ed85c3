package injector

import (
	"bytes"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/mutation"
)

// cacheEntries bounds a Cache. A ReplicaSet's burst needs one entry; pods that all differ need none,
// and a full cache is emptied rather than searched for a victim. cacheSeen bounds the fingerprints
// of pods seen, and the keys of pods seen once, which are not kept.
const (
	cacheEntries = 256
	cacheSeen    = 4096
)

// Cache reuses what the path answered for a pod for later pods that neither the policies nor the
// mutation can tell from it: the same snapshot, the same namespace and the same JSON but for the
// fields nothing reads (name, generateName and uid: a ReplicaSet's pods, unless a policy reads
// them). It also keeps the snapshot's SidecarSets prepared (mutation.Prepare) for every pod injected
// with them. The zero value is ready; a nil *Cache caches nothing.
//
// It is exact, not approximate. A decision is reused only when the snapshot is Deterministic. An
// injection is reused only for the same rendering of Injector.Now (the one value of the clock that
// reaches the pod: an updateTimestamp has whole seconds), and never when a matched SidecarSet may
// draw a Partial revision at random: then the path runs as without a cache. The clock is read, and
// the random source drawn, exactly as often as without one.
type Cache struct {
	mu      sync.Mutex
	snap    *engine.Snapshot
	ignored []string          // what the policies do not read of metadata's name, generateName and uid
	entries map[uint64]*entry // by the hash of the key, which the entry holds
	// prints counts the pods seen by fingerprint (up to twice), seen holds the key hashes of pods
	// seen once (podKey).
	prints map[uint64]uint8
	seen   map[uint64]struct{}

	// preparedFor is the snapshot whose SidecarSets are prepared in prepared: a snapshot's
	// SidecarSets are what it was compiled from, and never change.
	preparedFor *engine.Snapshot
	prepared    map[*v1beta1.SidecarSet]*mutation.Prepared
	// lastSets and lastPrepared are the SidecarSets prepare was last asked for and its answer:
	// most pods match the same few SidecarSets, whose answer is then shared instead of made per pod.
	lastSets     []*v1beta1.SidecarSet
	lastPrepared []*mutation.Prepared
}

// prepare returns sets, snap's SidecarSets, prepared (mutation.Prepare), each once per snapshot and
// shared by every pod injected with it, whether or not its decision could be cached; nil without a
// Cache. The list is read-only.
func (c *Cache) prepare(snap *engine.Snapshot, sets []*v1beta1.SidecarSet) []*mutation.Prepared {
	if c == nil || len(sets) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.preparedFor != snap {
		c.preparedFor, c.prepared, c.lastSets, c.lastPrepared = snap, map[*v1beta1.SidecarSet]*mutation.Prepared{}, nil, nil
	}
	if slices.Equal(sets, c.lastSets) {
		return c.lastPrepared
	}
	out := make([]*mutation.Prepared, len(sets))
	c.lastSets, c.lastPrepared = slices.Clone(sets), out
	for i, ss := range sets {
		p := c.prepared[ss]
		if p == nil {
			p = mutation.Prepare(ss)
			c.prepared[ss] = p
		}
		out[i] = p
	}
	return out
}

// entry is one pod's answer. plan is the injection for the clock reading planTime.
type entry struct {
	key      string
	dec      engine.Decision
	planTime string
	plan     *mutation.Result
}

// lookup returns the key of (ns, raw) under snap and its entry (nil if none yet); ok is false, and
// nothing is looked up, when snap's decisions cannot be reused. A pod whose fingerprint has not been
// seen is not keyed (its key's keyed is false): no entry can be its.
//
// What reads the pod's JSON is done outside the lock: concurrent admissions need not wait for it.
func (c *Cache) lookup(snap *engine.Snapshot, ns string, raw []byte) (k podKey, e *entry, ok bool) {
	if c == nil || !snap.Deterministic() {
		return podKey{}, nil, false
	}
	fp := fingerprint(ns, raw)
	c.mu.Lock()
	if c.snap != snap {
		c.snap, c.entries, c.prints, c.seen, c.ignored = snap, map[uint64]*entry{}, map[uint64]uint8{}, map[uint64]struct{}{}, nil
		for _, f := range []string{"name", "generateName", "uid"} {
			if !snap.ReadsPod("metadata", f) {
				c.ignored = append(c.ignored, f)
			}
		}
	}
	ignored := c.ignored
	_, again := c.prints[fp]
	c.mu.Unlock()
	if !again {
		return podKey{fp: fp}, nil, true
	}
	k = newPodKey(ignored, ns, raw)
	k.fp, k.hash, k.keyed = fp, k.sum(), true
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap == snap {
		if e = c.entries[k.hash]; e != nil && !k.equal(e.key) {
			e = nil // another pod with the same hash: a miss, which store replaces
		}
	}
	return k, e, true
}

// store keeps dec under k if snap is still the cache's and k's pod looks like a pod seen before,
// and returns the entry it keeps (nil: none). A pod seen once is not kept: every pod of a stream of
// distinct pods would be copied for nothing; a template's second pod is. The first pod of a
// fingerprint is not keyed, so a keyed pod with a fingerprint seen once is taken for a template's
// second pod; after that, a pod is kept when its key has been seen before (pods with the same
// labels that differ elsewhere, a DaemonSet's, are each seen once).
func (c *Cache) store(snap *engine.Snapshot, k podKey, dec engine.Decision) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != snap {
		return nil
	}
	n := c.prints[k.fp]
	if n < 2 {
		if len(c.prints) >= cacheSeen {
			clear(c.prints)
		}
		c.prints[k.fp] = n + 1
	}
	if !k.keyed {
		return nil
	}
	if _, again := c.seen[k.hash]; n >= 2 && !again {
		if len(c.seen) >= cacheSeen {
			clear(c.seen)
		}
		c.seen[k.hash] = struct{}{}
		return nil
	}
	if len(c.entries) >= cacheEntries {
		clear(c.entries)
	}
	e := &entry{key: k.String(), dec: dec}
	c.entries[k.hash] = e
	return e
}

// fingerprint hashes what of a pod tells a template's pods from other pods at little cost: its
// namespace and its labels, the bytes from the first `"labels":` of its JSON to the next '}' (none
// when there is no such name). Pods with the same key (podKey) have the same fingerprint: the labels
// of the API server's JSON are a flat object of names and values that hold no '}', and no masked
// value lies between them. Other JSON may give a template's pods different fingerprints, which only
// costs the cache a hit: what it answers rests on the key alone. Keying a pod hashes all of its
// JSON, which a stream of pods that all differ would do for nothing (BenchmarkPerPod's distinct
// pods); finding the labels with a JSON parser cost as much again as this.
func fingerprint(ns string, raw []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(keySeed)
	_, _ = h.WriteString(ns)
	_ = h.WriteByte(0)
	if at := bytes.Index(raw, labelsName); at >= 0 {
		labels := raw[at:]
		if end := bytes.IndexByte(labels, '}'); end >= 0 {
			labels = labels[:end]
		}
		_, _ = h.Write(labels)
	}
	return h.Sum64()
}

var labelsName = []byte(`"labels":`)

// keySeed seeds the hashes of pods' keys and fingerprints: random, and the same for every Cache of
// the process, so that it is read without a lock.
var keySeed = maphash.MakeSeed()

// podKey is ns and raw with the values of the ignored metadata fields replaced by a mark that
// keeps only whether they are empty, which the patch depends on (withParents). It is hashed and
// compared piece by piece, so that a lookup, which every pod of a distinct stream misses, copies
// nothing; only a stored key is written out.
type podKey struct {
	ns   string
	raw  []byte
	cuts [3]struct{ from, to int } // the ignored values, in raw's order
	n    int
	// keyed says the key was made (lookup); fp is the pod's fingerprint, hash the key's.
	keyed    bool
	fp, hash uint64
}

// keyMark replaces an ignored non-empty value.
const keyMark = `"*"`

// newPodKey is the key of raw in ns; ignored are names of metadata fields, three at most. The
// metadata is read in one pass, which stops once every ignored field is found, and only the first
// of a name counts, as gjson.Get reads it: looking up each field in turn scanned the metadata up to
// three times (all of it for an absent field).
func newPodKey(ignored []string, ns string, raw []byte) podKey {
	k := podKey{ns: ns, raw: raw}
	if len(ignored) == 0 {
		return k
	}
	// A string view of raw, not a copy (GetBytes copies what it returns): only positions are kept.
	view := unsafe.String(unsafe.SliceData(raw), len(raw)) //nolint:gosec // G103: read only, and nothing read is kept
	var found [len(k.cuts)]bool
	left := len(ignored)
	gjson.Get(view, "metadata").ForEach(func(key, v gjson.Result) bool {
		for i, f := range ignored {
			if found[i] || key.Str != f {
				continue
			}
			found[i] = true
			left--
			// In raw's order, as ForEach reads it.
			if v.Index > 0 && v.Type == gjson.String && v.Str != "" {
				k.cuts[k.n].from, k.cuts[k.n].to = v.Index, v.Index+len(v.Raw)
				k.n++
			}
		}
		return left > 0
	})
	return k
}

// pieces calls f with the key's bytes in order; a false return stops it.
func (k *podKey) pieces(f func(string, []byte) bool) {
	if !f(k.ns, nil) || !f("\x00", nil) {
		return
	}
	at := 0
	for _, c := range k.cuts[:k.n] {
		if !f("", k.raw[at:c.from]) || !f(keyMark, nil) {
			return
		}
		at = c.to
	}
	f("", k.raw[at:])
}

func (k *podKey) sum() uint64 {
	var h maphash.Hash
	h.SetSeed(keySeed)
	k.pieces(func(s string, b []byte) bool {
		_, _ = h.WriteString(s)
		_, _ = h.Write(b)
		return true
	})
	return h.Sum64()
}

// equal reports whether the key reads stored.
func (k *podKey) equal(stored string) bool {
	rest, same := stored, true
	k.pieces(func(s string, b []byte) bool {
		// string(b) in a comparison does not copy b.
		if len(rest) < len(s)+len(b) || rest[:len(s)] != s || rest[len(s):len(s)+len(b)] != string(b) {
			same = false
			return false
		}
		rest = rest[len(s)+len(b):]
		return true
	})
	return same && rest == ""
}

func (k *podKey) String() string {
	var b strings.Builder
	b.Grow(len(k.ns) + 1 + len(k.raw) + k.n*len(keyMark))
	k.pieces(func(s string, p []byte) bool {
		b.WriteString(s)
		b.Write(p)
		return true
	})
	return b.String()
}

// inject is the injection of a decided pod through the cache, with its final patch (withParents):
// e's plan when it was made for the same clock reading, else a new one, kept in e. Which parents
// the patch needs depends on nothing the key leaves out, so the plan keeps the final patch.
func (c *Cache) inject(snap *engine.Snapshot, m *mutation.Injector, in mutation.Input, raw []byte, e *entry) (mutation.Result, error) {
	pod := in.Pod
	// Prepared only when the injection runs: a plan that is reused needs none.
	final := func(m *mutation.Injector) (mutation.Result, error) {
		in.Prepared = c.prepare(snap, in.SidecarSets)
		out, err := m.Inject(in)
		out.Patch = withParents(pod, raw, out.Patch)
		return out, err
	}
	if e == nil || m == nil || m.Now == nil || anyRandom(in.SidecarSets) {
		return final(m)
	}
	now := m.Now()
	stamp := clockStamp(now)
	// A plan made without the pod serves only requests that want no pod.
	if plan := c.plan(e, stamp); plan != nil && (plan.Pod != nil || in.PatchOnly) {
		out := mutation.Result{Patch: plan.Patch, Injected: plan.Injected}
		if !in.PatchOnly {
			// The plan's pod is another pod's: it differs from this one in the ignored fields only.
			injected := *plan.Pod
			injected.Name, injected.GenerateName, injected.UID = pod.Name, pod.GenerateName, pod.UID
			out.Pod = &injected
		}
		return out, nil
	}
	out, err := final(pinned(m, now))
	if err != nil {
		return mutation.Result{}, err
	}
	c.mu.Lock()
	e.plan, e.planTime = &out, stamp
	c.mu.Unlock()
	return out, nil
}

// plan is e's plan if it was made for the clock reading stamp.
func (c *Cache) plan(e *entry, stamp string) *mutation.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.planTime != stamp {
		return nil
	}
	return e.plan
}

// clockStamp is how a clock reading appears in a pod: an updateTimestamp, whole seconds in UTC.
func clockStamp(now time.Time) string {
	b, _ := metav1.NewTime(now).MarshalJSON() // formats a time, which cannot fail
	return string(b)
}

// pinned is m with its clock stopped at now, so that a reading already taken is the one injection
// uses: the clock is read once per pod, with a cache as without.
func pinned(m *mutation.Injector, now time.Time) *mutation.Injector {
	return &mutation.Injector{Now: func() time.Time { return now }, Rand: m.Rand}
}

// Answer is Pod for a request whose pod is not decoded yet (the webhook's: decoding a pod costs more
// than deciding and injecting it), answered from c alone. ok says c held the answer; its Pod is then
// nil. raw must be valid JSON (an AdmissionReview decoded without error) and ns the request's
// namespace. When ok is false, the request goes through Pod with next as its Injector: m itself, or
// m with its clock stopped at the reading Answer took.
func (c *Cache) Answer(snap *engine.Snapshot, m *mutation.Injector, ns string, raw []byte) (res PodResult, ok bool, next *mutation.Injector) {
	if c == nil {
		return res, false, m
	}
	res.Namespace = podNamespace(gjson.GetBytes(raw, "metadata.namespace").Str, ns)
	_, e, cached := c.lookup(snap, res.Namespace, raw)
	if !cached || e == nil {
		return PodResult{}, false, m
	}
	res.Patch = []jsonpatch.JsonPatchOperation{}
	if decided(&res, e.dec) {
		return res, true, m
	}
	if m == nil || m.Now == nil || anyRandom(e.dec.Matched) {
		return PodResult{}, false, m
	}
	now := m.Now()
	plan := c.plan(e, clockStamp(now))
	if plan == nil {
		return PodResult{}, false, pinned(m, now)
	}
	res.Outcome, res.Injected, res.Patch = Injected, plan.Injected, plan.Patch
	return res, true, m
}

func anyRandom(sets []*v1beta1.SidecarSet) bool {
	for _, ss := range sets {
		if mutation.Random(ss) {
			return true
		}
	}
	return false
}
