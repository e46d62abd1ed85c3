package mutation

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		if got := marshalUpgradeSpecs(m); got != string(want) {
			t.Errorf("%q:\n got %s\nwant %s", name, got, want)
		}
	}
}
