package bundles

import (
	"testing"
)

// FuzzReadBytes feeds arbitrary bytes to the reader every downloaded or persisted bundle goes
// through: it must answer a bundle or an error naming the source, never panic, and never hand out
// a bundle without a revision (the loader keys activations and Events by it).
func FuzzReadBytes(f *testing.F) {
	f.Add(writeBundle(&testing.T{}, nil))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Add([]byte("not a bundle"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := ReadBytes("fuzz.tar.gz", raw, nil)
		if err != nil {
			if b != nil {
				t.Fatalf("a bundle and an error: %v", err)
			}
			return
		}
		if b == nil {
			t.Fatal("no bundle and no error")
		}
	})
}
