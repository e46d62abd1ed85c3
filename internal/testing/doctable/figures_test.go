package doctable

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFigures(t *testing.T) {
	tests := []struct {
		name     string
		markdown string
		lines    []int // the lines reported
	}{
		{"a time below a second", "The decision takes 52.3 µs per pod.", []int{1}},
		{"a range of sizes", "The manager's RSS is 98–102 MiB.", []int{1}},
		{"allocations", "Each admission makes 13 allocs.", []int{1}},
		{"a rate", "The webhook answers 22,000/s here.", []int{1}},
		{"a speed-up", "The handler is now 3× faster.", []int{1}},
		{"a percentage less", "A scale-up costs 11 % less CPU per pod.", []int{1}},
		{"seconds, estimated", "A whole compile takes about 0.8 s.", []int{1}},
		{"the line the number is on", "The decision\ntakes 52 µs.", []int{2}},
		{"two figures on one line, reported once", "It takes 52 µs and 13 allocs.", []int{1}},
		{"seconds, as a setting", "A replica that cannot answer within a 3 s timeout is skipped.", nil},
		{"a version is no figure", "kube-apiserver v1.37.2 and etcd 3.5.", nil},
		{"a fenced block", "```console\n$ go test -bench . # 52 µs\n```", nil},
		{"an indented fence", "1. Run:\n   ```yaml\n   memory: 512MiB\n   limit: 64 MiB\n   ```", nil},
		{"a code span", "Run with `--gc-heap-target 64 MiB` set.", nil},
		{"a table of settings", "| flag | default |\n|---|---|\n| `--max` | 16 MiB |", nil},
		{"another table", "| case | time |\n|---|---|\n| distinct | 52 µs |", []int{3}},
		{"a histogram's buckets", "| metric | type |\n|---|---|\n| `d` | histogram (25 µs to ~1.6 s) |", nil},
		{"a sentence naming a bound", "Each file is at most 32 MiB once decompressed.", nil},
		{"a bound after the number", "Messages are cut to the API server's 1 kB limit.", nil},
		{"a bound in another sentence", "The default is 5.\nIt takes 52 µs.", []int{2}},
		{"a bound in another cell", "| case | note |\n|---|---|\n| 52 µs | at most five |", []int{3}},
		{"a threshold", "A review over 7 MiB is refused; targets are ≤ 60 µs.", nil},
		{"a list item is a paragraph", "- up to five\n- it takes 52 µs", []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lines []int
			for _, f := range Figures([]byte(tt.markdown)) {
				lines = append(lines, f.Line)
			}
			assert.Equal(t, tt.lines, lines)
		})
	}
}
