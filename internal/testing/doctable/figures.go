package doctable

import (
	"bufio"
	"bytes"
	"regexp"
	"slices"
	"strings"
)

// A Figure is a line of markdown that states a performance figure.
type Figure struct {
	Line int    // 1-based
	Text string // the line as written
}

var (
	// figure is a number with a unit that measures performance: a time below a second, a size, an
	// allocation count, a rate or a speed-up; a duration in seconds only when estimated (≈, ~,
	// about), since whole seconds are mostly timeouts and intervals. The first group is what precedes
	// the number, so that digits inside a word or a version (v1.37) are no figure.
	figure = regexp.MustCompile(`(^|[^\w.])((?:[≈~+−-]\s*)?\d[\d,]*(?:\.\d+)?(?:\s*(?:–|…|-|to)\s*[+−-]?\d[\d,]*(?:\.\d+)?)?)\s*` +
		`(?:(?:ns|µs|μs|ms|B|kB|KB|MB|GB|KiB|MiB|GiB)(?:/op)?\b|allocs\b|allocs/op|allocations\b|/s\b|(?:×|x|times|%)\s*(?:faster|slower|less|more|fewer)\b)` +
		`|(?:≈|~|\babout)\s*\d[\d,]*(?:\.\d+)?\s*s\b`)
	// bound is a word that makes a sentence one about limits and settings.
	bound = regexp.MustCompile(`(?i)\bdefaults?\b|\blimit|\bbound|\bat most\b|\bat least\b|\bup to\b|\bpast\b|\bwithin\b|\bcap(ped)?\b|\bmaximum\b|\bhistogram\b`)
	// threshold is a comparison right before a number, which makes it a threshold.
	threshold = regexp.MustCompile(`(?i)(\b(over|above|below|under|beyond)|[≤≥<>])\s*$`)
	// settingColumn is a table header cell that makes the table one of settings.
	settingColumn = regexp.MustCompile(`(?i)default|limit|bound|value|setting`)
	codeSpan      = regexp.MustCompile("`[^`]*`")
	// sentenceEnd ends a sentence: a full stop, question or exclamation mark before a space.
	sentenceEnd = regexp.MustCompile(`[.!?]\s`)
	// blockStart starts a paragraph of its own although no blank line comes before it.
	blockStart = regexp.MustCompile(`^\s*(#|[-*+]\s|\d+\.\s|<a )`)
)

// Figures returns the lines of markdown that state a performance figure: 52 µs, 140 MB, 13 allocs,
// 22,000/s, 2× faster, about 0.8 s. A number with such a unit states a limit or a setting instead,
// and is no figure, when it is
//   - in a fenced code block (commands, YAML, output) or an inline code span (flags, fields);
//   - in a table with a column of settings: a header cell naming a default, limit, bound, value or
//     setting;
//   - in a sentence (or a table cell) that names a bound: default, limit, bound, at most, at least,
//     up to, past, within, cap, maximum, or a histogram (its buckets);
//   - right after over, above, below, under, beyond, ≤, ≥, < or >: a threshold.
func Figures(markdown []byte) []Figure {
	var figures []Figure
	var para []string // the lines of the current paragraph, code spans emptied
	start := 0        // the paragraph's first line
	flush := func() {
		figures = append(figures, paragraphFigures(para, start)...)
		para = nil
	}
	var lines []string
	fenced, settingsTable := false, false
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		lines = append(lines, line)
		trimmed := strings.TrimSpace(line)
		row := strings.HasPrefix(trimmed, "|")
		switch {
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			flush()
			fenced = !fenced
			continue
		case fenced:
			continue
		case trimmed == "" || blockStart.MatchString(line) || row:
			flush()
		}
		if row {
			if n == 1 || !strings.HasPrefix(strings.TrimSpace(lines[n-2]), "|") {
				settingsTable = slices.ContainsFunc(splitRow(trimmed), settingColumn.MatchString)
			}
			if !settingsTable {
				// Each cell is a paragraph of its own.
				for _, cell := range splitRow(codeSpan.ReplaceAllString(trimmed, "``")) {
					figures = append(figures, paragraphFigures([]string{cell}, n)...)
				}
			}
			continue
		}
		if trimmed == "" {
			continue
		}
		if para == nil {
			start = n
		}
		para = append(para, codeSpan.ReplaceAllString(line, "``"))
	}
	flush()
	for i := range figures {
		figures[i].Text = lines[figures[i].Line-1]
	}
	return slices.CompactFunc(figures, func(a, b Figure) bool { return a.Line == b.Line })
}

// paragraphFigures returns the figures of the paragraph made of lines, the first of which is line
// first of the document, in sentences that name no bound.
func paragraphFigures(lines []string, first int) []Figure {
	var text strings.Builder
	var offsets []int // where each line starts in text
	for _, l := range lines {
		offsets = append(offsets, text.Len())
		text.WriteString(l)
		text.WriteByte(' ')
	}
	s := text.String()
	var figures []Figure
	from := 0
	for _, end := range append(sentenceEnd.FindAllStringIndex(s, -1), []int{len(s), len(s)}) {
		sentence := s[from:end[1]]
		if !bound.MatchString(sentence) {
			for _, m := range figure.FindAllStringSubmatchIndex(sentence, -1) {
				number := m[0]
				if m[3] >= 0 { // after the character before the number
					number = m[3]
				}
				if threshold.MatchString(sentence[:number]) {
					continue
				}
				line := first
				for i, o := range offsets {
					if from+number >= o {
						line = first + i
					}
				}
				figures = append(figures, Figure{Line: line})
			}
		}
		from = end[1]
	}
	return figures
}
