package testfiles

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTail(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("0123456789\n", 10) // 110 bytes, lines of 11
	Write(t, dir, map[string]string{"short.log": "one\ntwo\n", "long.log": long, "one-line.log": strings.Repeat("x", 50)})
	for _, tc := range []struct {
		name, file string
		max        int
		want       string
	}{
		{"no such file", "absent.log", 100, ""},
		{"shorter than max: whole", "short.log", 100, "one\ntwo\n"},
		{"longer: from the first whole line within max", "long.log", 30, "0123456789\n0123456789\n"},
		{"max on a line start: whole lines", "long.log", 22, "0123456789\n0123456789\n"},
		{"no newline within max: the raw end", "one-line.log", 10, strings.Repeat("x", 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Tail(filepath.Join(dir, tc.file), tc.max))
		})
	}
}
