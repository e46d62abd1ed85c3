package fieldpath

import "testing"

func TestSplitMaybeSubscripted(t *testing.T) {
	cases := []struct {
		in, path, subscript string
		ok                  bool
	}{
		{"metadata.labels['app']", "metadata.labels", "app", true},
		{"metadata.annotations['a.b/c']", "metadata.annotations", "a.b/c", true},
		{"metadata.labels['']", "metadata.labels", "", true},
		{"metadata.annotations['a[b]c']", "metadata.annotations", "a[b]c", true},
		{"metadata.name", "metadata.name", "", false},
		{"['k']", "['k']", "", false},
		{"metadata.labels['k'", "metadata.labels['k'", "", false},
		{"metadata.labelsk']", "metadata.labelsk']", "", false},
		{"", "", "", false},
	}
	for _, tc := range cases {
		path, subscript, ok := SplitMaybeSubscripted(tc.in)
		if path != tc.path || subscript != tc.subscript || ok != tc.ok {
			t.Errorf("SplitMaybeSubscripted(%q) = (%q, %q, %v), want (%q, %q, %v)", tc.in, path, subscript, ok, tc.path, tc.subscript, tc.ok)
		}
	}
}
