package mutation

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/internal/testing/randomobjects"
)

// marshalUpgradeSpecs must write what encoding/json writes, for every map: the named cases, then
// random ones over strings that need escaping and times with and without fractions.
func TestMarshalUpgradeSpecs(t *testing.T) {
	stamp := metav1.NewTime(time.Date(2024, 2, 29, 23, 59, 58, 999, time.FixedZone("x", 3600)))
	cases := map[string]map[string]upgradeSpec{
		"empty":              {},
		"one":                {"log": {UpdateTimestamp: stamp, Hash: "h1", SidecarSetName: "log", SidecarList: []string{"a", "b"}, ControllerRevision: "log-1"}},
		"zero time, no list": {"old": {Hash: "h", SidecarSetName: "old"}},
		"empty list":         {"init": {UpdateTimestamp: stamp, SidecarSetName: "init", SidecarList: []string{}}},
		"escapes":            {"a\"<b>&\\\n\u2028é\x7f\xff": {Hash: "<&>", SidecarSetName: "\t", SidecarList: []string{"\x00"}, ControllerRevision: "é"}},
		"key order":          {"b": {}, "a": {}, "B": {}, "a-": {}, "": {}},
	}
	r := rand.New(rand.NewPCG(7, 7))
	alphabet := []string{"a", "z", "-", ".", "\"", "\\", "<", "&", "é", "\u2028", "\x01", "\xfe"}
	str := func() string {
		s := ""
		for range r.IntN(5) {
			s += alphabet[r.IntN(len(alphabet))]
		}
		return s
	}
	for range 200 {
		m := map[string]upgradeSpec{}
		for range r.IntN(4) {
			s := upgradeSpec{Hash: str(), SidecarSetName: str(), ControllerRevision: str()}
			if r.IntN(3) > 0 {
				s.UpdateTimestamp = metav1.NewTime(time.Unix(r.Int64N(4e9), r.Int64N(1e9)))
			}
			for range r.IntN(3) {
				s.SidecarList = append(s.SidecarList, str())
			}
			m[str()] = s
		}
		cases[str()+string(rune(len(cases)))] = m
	}
	for name, m := range cases {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := (&upgradeSpecs{had: m}).marshal(); got != string(want) {
			t.Errorf("%q:\n got %s\nwant %s", name, got, want)
		}
	}
}

// The hand-written encoder must follow SidecarSetUpgradeSpec's fields as they are, not as they were
// when it was written: every field, present or not, is filled at random (randomobjects fills fields
// no test names), and each is left at its zero value half of the time, so that a field added with
// omitempty is both written and left out. If this fails, marshalUpgradeSpecs (and upgradeSpecFixed)
// must learn the field.
func TestMarshalUpgradeSpecsEveryField(t *testing.T) {
	fields := reflect.TypeFor[upgradeSpec]().NumField()
	zeroed, written := make([]int, fields), make([]int, fields)
	for seed := range int64(300) {
		f := randomobjects.Filler(t, seed)
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		m := map[string]upgradeSpec{}
		for range r.IntN(4) {
			var s upgradeSpec
			f.Fill(&s)
			v := reflect.ValueOf(&s).Elem()
			for i := range fields {
				if r.IntN(2) == 0 {
					v.Field(i).SetZero()
				}
				if v.Field(i).IsZero() {
					zeroed[i]++
				} else {
					written[i]++
				}
			}
			var key string
			f.Fill(&key)
			m[key] = s
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := (&upgradeSpecs{had: m}).marshal(); got != string(want) {
			t.Fatalf("seed %d:\n got %s\nwant %s", seed, got, want)
		}
	}
	for i := range fields {
		if zeroed[i] < 10 || written[i] < 10 {
			t.Errorf("field %s: zero %d times, set %d times", reflect.TypeFor[upgradeSpec]().Field(i).Name, zeroed[i], written[i])
		}
	}
}

// Recording entries over a pod's must give what writing each into the pod's map in turn gives,
// duplicates included: a recorded entry replaces the one before it of its name, keeping its
// updateTimestamp when the hash is the same and that timestamp is set.
func TestRecordUpgradeSpecs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	names, hashes := []string{"a", "b", "c", "d"}, []string{"h1", "h2"}
	stamp := func() metav1.Time {
		if r.IntN(4) == 0 {
			return metav1.Time{}
		}
		return metav1.NewTime(time.Unix(1700000000+r.Int64N(5), 0))
	}
	spec := func(name string) upgradeSpec {
		return upgradeSpec{UpdateTimestamp: stamp(), Hash: hashes[r.IntN(2)], SidecarSetName: name, SidecarList: []string{name + "-c"}}
	}
	kept := 0
	for round := range 500 {
		var had map[string]upgradeSpec
		if r.IntN(3) > 0 {
			had = map[string]upgradeSpec{}
			for range 1 + r.IntN(3) {
				name := names[r.IntN(len(names))]
				had[name] = spec(name)
			}
		}
		s := upgradeSpecs{had: maps.Clone(had)}
		want := maps.Clone(had)
		if want == nil {
			want = map[string]upgradeSpec{}
		}
		for range r.IntN(5) {
			next := spec(names[r.IntN(len(names))])
			s.record(next)
			// The map the annotation was before this type: each entry written in turn.
			if prev, ok := want[next.SidecarSetName]; ok && prev.Hash == next.Hash && !prev.UpdateTimestamp.IsZero() {
				if !next.UpdateTimestamp.Equal(&prev.UpdateTimestamp) {
					kept++
				}
				next.UpdateTimestamp = prev.UpdateTimestamp
			}
			want[next.SidecarSetName] = next
		}
		w, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.marshal(); got != string(w) {
			t.Fatalf("round %d: had %v\n got %s\nwant %s", round, had, got, w)
		}
	}
	if kept == 0 {
		t.Fatal("no round kept an earlier timestamp: the generator proves little")
	}
}
