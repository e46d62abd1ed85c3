package fieldpath

import "strings"

// SplitMaybeSubscripted is Kubernetes' fieldpath.SplitMaybeSubscriptedPath:
// "metadata.labels['k']" → ("metadata.labels", "k", true); a path without a subscript is returned
// whole with ok false.
func SplitMaybeSubscripted(fieldPath string) (path, subscript string, ok bool) {
	s, ok := strings.CutSuffix(fieldPath, "']")
	if !ok {
		return fieldPath, "", false
	}
	path, subscript, ok = strings.Cut(s, "['")
	if !ok || path == "" {
		return fieldPath, "", false
	}
	return path, subscript, true
}
