// Package readonly holds objects to being read only: the SidecarSets and ControllerRevisions the
// manager's informer cache hands the policy loader are shared, as they are, by the builder, every
// snapshot and every face, and a write through any of them would change the cache's object under
// the controller.
//
// It is test support: no production code may import it.
package readonly

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Guard fails tb, when it ends, if any of objs then reads otherwise than now (as JSON).
func Guard[T any](tb testing.TB, objs ...T) {
	tb.Helper()
	before := make([][]byte, len(objs))
	for i, o := range objs {
		before[i] = mustJSON(tb, o)
	}
	tb.Cleanup(func() {
		for i, o := range objs {
			if after := mustJSON(tb, o); !bytes.Equal(before[i], after) {
				tb.Errorf("an object handed over read-only was written\nbefore: %s\nafter:  %s", before[i], after)
			}
		}
	})
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}
