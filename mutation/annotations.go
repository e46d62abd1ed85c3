package mutation

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// upgradeSpec is one entry of the pod's hash annotations (v1beta1.SidecarSetUpgradeSpec).
type upgradeSpec = v1beta1.SidecarSetUpgradeSpec

// upgradeSpecs is one of the two hash annotations as injection rewrites it: the entries the pod
// had, and those injection records over them. A new pod had none, and its entries are the recorded
// ones, which a slice holds for a fraction of what a map of these 96-byte values costs.
type upgradeSpecs struct {
	had      map[string]upgradeSpec // nil when the pod had none
	recorded []upgradeSpec          // in injection order, keyed by SidecarSetName
}

// parseUpgradeSpecs reads one of the two hash annotations; the legacy flat form is upgraded to the
// structured one when the annotation is rewritten. A value that is neither is an error, as it is
// in OpenKruise's webhook: overwriting it would lose the controller's record of that pod. entries
// has room for what injection will record.
func parseUpgradeSpecs(ann map[string]string, key string, entries []upgradeSpec) (upgradeSpecs, error) {
	s := upgradeSpecs{recorded: entries[:0:cap(entries)]}
	if ann[key] == "" {
		return s, nil
	}
	had, err := v1beta1.ParseUpgradeSpecs(ann[key])
	if err != nil {
		return s, podFieldErr("metadata.annotations["+key+"]", err)
	}
	if len(had) > 0 {
		s.had = had
	}
	return s, nil
}

// record writes a SidecarSet's entry over the pod's and any recorded before of its name. The
// previous updateTimestamp is kept when the hash did not change (see resolve).
func (s *upgradeSpecs) record(next upgradeSpec) { s.recorded = append(s.recorded, next) }

// named is an entry of the annotation under its key.
type named struct {
	key  string
	spec upgradeSpec
}

// resolve leaves one recorded entry per name, sorted by name: each replaces the one before it of
// the same name (the pod's first), keeping that one's updateTimestamp when the hash did not change:
// the timestamp says when the pod got this version of the sidecars, and a re-injection of the same
// version (webhook reinvocation, the CLI run twice) must leave the pod byte-identical instead of
// moving the timestamp to the current clock. It works in place and may run again.
func (s *upgradeSpecs) resolve() []upgradeSpec {
	rec := s.recorded
	slices.SortStableFunc(rec, func(a, b upgradeSpec) int { return strings.Compare(a.SidecarSetName, b.SidecarSetName) })
	w := 0
	for i := 0; i < len(rec); w++ {
		name := rec[i].SidecarSetName
		prev, ok := s.had[name]
		for ; i < len(rec) && rec[i].SidecarSetName == name; i++ {
			next := rec[i]
			if ok && prev.Hash == next.Hash && !prev.UpdateTimestamp.IsZero() {
				next.UpdateTimestamp = prev.UpdateTimestamp
			}
			prev, ok = next, true
		}
		rec[w] = prev
	}
	s.recorded = rec[:w]
	return s.recorded
}

// marshal is json.Marshal of the annotation's map, byte for byte, written by hand: it runs twice
// per injected pod over one entry per SidecarSet the pod has, and encoding/json's reflection over
// that map was a large part of the injection's CPU with ten SidecarSets (BenchmarkPerPod).
// Strings that encoding/json would escape go through it.
func (s *upgradeSpecs) marshal() string {
	rec := s.resolve()
	// A new pod's entries are the recorded ones; a pod that had some has them merged in by key.
	var merged []named
	if len(s.had) > 0 {
		merged = make([]named, 0, len(rec)+len(s.had))
		for _, r := range rec {
			merged = append(merged, named{r.SidecarSetName, r})
		}
		for key, spec := range s.had {
			if _, found := slices.BinarySearchFunc(rec, key, func(r upgradeSpec, k string) int { return strings.Compare(r.SidecarSetName, k) }); !found {
				merged = append(merged, named{key, spec})
			}
		}
		slices.SortFunc(merged, func(a, b named) int { return strings.Compare(a.key, b.key) })
	}
	// Sized once: with a SidecarSet per entry, growing the builder by doubling allocated twice
	// what it wrote (BenchmarkPerPod). Escapes, rare, may still grow it.
	size := 2
	for i := range rec {
		size += entrySize(rec[i].SidecarSetName, &rec[i])
	}
	for i := range merged {
		size += entrySize(merged[i].key, &merged[i].spec)
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteByte('{')
	if merged == nil {
		for i := range rec {
			writeEntry(&b, i > 0, rec[i].SidecarSetName, &rec[i])
		}
	}
	for i := range merged {
		writeEntry(&b, i > 0, merged[i].key, &merged[i].spec)
	}
	b.WriteByte('}')
	return b.String()
}

// entrySize is at least what writeEntry writes for an entry without escapes.
func entrySize(key string, s *upgradeSpec) int {
	n := len(key) + len(s.Hash) + len(s.SidecarSetName) + len(s.ControllerRevision) + len(upgradeSpecFixed)
	for _, c := range s.SidecarList {
		n += len(c) + 3
	}
	return n
}

// writeEntry writes `"key":{...}`, after a comma unless it is the first.
func writeEntry(b *strings.Builder, comma bool, key string, s *upgradeSpec) {
	if comma {
		b.WriteByte(',')
	}
	writeJSONString(b, key)
	b.WriteString(`:{"updateTimestamp":`)
	// metav1.Time.MarshalJSON, without its allocation.
	if s.UpdateTimestamp.IsZero() {
		b.WriteString("null")
	} else {
		var stamp [len(time.RFC3339) + 2]byte
		b.WriteByte('"')
		b.Write(s.UpdateTimestamp.UTC().AppendFormat(stamp[:0], time.RFC3339))
		b.WriteByte('"')
	}
	b.WriteString(`,"hash":`)
	writeJSONString(b, s.Hash)
	b.WriteString(`,"sidecarSetName":`)
	writeJSONString(b, s.SidecarSetName)
	b.WriteString(`,"sidecarList":`)
	if s.SidecarList == nil {
		b.WriteString("null")
	} else {
		b.WriteByte('[')
		for j, c := range s.SidecarList {
			if j > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, c)
		}
		b.WriteByte(']')
	}
	if s.ControllerRevision != "" {
		b.WriteString(`,"controllerRevision":`)
		writeJSONString(b, s.ControllerRevision)
	}
	b.WriteByte('}')
}

// upgradeSpecFixed is what an entry of marshalUpgradeSpecs writes besides its strings: the keys,
// quotes and punctuation, the longest time, and the controllerRevision key.
const upgradeSpecFixed = `"":{"updateTimestamp":"2006-01-02T15:04:05Z07:00","hash":"","sidecarSetName":"","sidecarList":[]},"controllerRevision":""}`

// writeJSONString writes s as encoding/json does: quoted as it is when it holds only printable
// ASCII that needs no escape (names, hashes), else by encoding/json itself.
func writeJSONString(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b.WriteString(marshalString(s))
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

func marshalString(v any) string {
	// Every value marshalled here is a map of strings or of upgradeSpec, which cannot fail.
	b, _ := json.Marshal(v)
	return string(b)
}

// injectedList is the union of the pod's kruise.io/sidecarset-injected-list and names, sorted and
// comma-joined (W24). The old value is split without cleaning, as OpenKruise does, so the list
// reads the same whichever of the two wrote it last.
func injectedList(old string, names []string) string {
	if old == "" && strictlySorted(names) { // a new pod's: names are in the decision's order, by name
		return strings.Join(names, ",")
	}
	set := map[string]bool{}
	if old != "" {
		for _, n := range strings.Split(old, ",") {
			set[n] = true
		}
	}
	for _, n := range names {
		set[n] = true
	}
	return strings.Join(slices.Sorted(maps.Keys(set)), ",")
}

// strictlySorted reports whether names are sorted without repeats: the set of them, as injectedList
// writes it.
func strictlySorted(names []string) bool {
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			return false
		}
	}
	return true
}

// workingHotUpgrade reads kruise.io/sidecarset-working-hotupgrade-container. A value that does not
// parse is not an error, as in OpenKruise: whatever encoding/json salvaged from it (nothing after a
// syntax error, the well-typed entries after a type error) is kept and the injected containers are
// added to it.
func workingHotUpgrade(ann map[string]string) map[string]string {
	m := map[string]string{}
	if raw, ok := ann[v1beta1.SidecarSetWorkingHotUpgradeContainer]; ok {
		_ = json.Unmarshal([]byte(raw), &m)
		if m == nil { // the value was JSON null
			m = map[string]string{}
		}
	}
	return m
}
