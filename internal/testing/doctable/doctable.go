// Package doctable reads the reference tables of docs/*.md and what the code defines that they
// list, so that tests can hold the two equal: metrics with their labels, and Event reasons. It also
// finds the performance figures a document states (Figures), which belong in docs/benchmarks.md alone.
package doctable

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// productModule matches the go.mod line of the product's module.
var productModule = regexp.MustCompile(`(?m)^module github\.com/sidecarops/sidecarops\s*$`)

// Root is the product module's root directory, found from the working directory, so tests keep
// working when their package moves, or sits in a module of its own inside the checkout (test/promql).
func Root() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && productModule.Match(data) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/sidecarops/sidecarops above %s", wd)
		}
		dir = parent
	}
}

// Doc reads docs/name of the module.
func Doc(name string) ([]byte, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(root, "docs", name))
}

// A Table is the body rows of one markdown table, each row's cells trimmed.
type Table struct {
	Header []string
	Rows   [][]string
}

// Tables returns the tables of markdown under the heading whose text is heading (any level), up
// to the next heading of the same or a higher level; heading "" means the whole document.
func Tables(markdown []byte, heading string) ([]Table, error) {
	var tables []Table
	var cur *Table
	in, level, found := heading == "", 0, heading == ""
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		if h := strings.TrimLeft(line, "#"); heading != "" && len(h) < len(line) && strings.HasPrefix(h, " ") {
			l := len(line) - len(h)
			switch {
			case strings.TrimSpace(h) == heading:
				in, level, found = true, l, true
			case in && l <= level:
				in = false
			}
		}
		if !in || !strings.HasPrefix(line, "|") {
			cur = nil
			continue
		}
		cells := splitRow(line)
		switch {
		case cur == nil:
			tables = append(tables, Table{Header: cells})
			cur = &tables[len(tables)-1]
		case len(cur.Rows) == 0 && isDelimiter(cells):
		default:
			cur.Rows = append(cur.Rows, cells)
		}
	}
	if !found {
		return nil, fmt.Errorf("no heading %q", heading)
	}
	return tables, sc.Err()
}

func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	inCode := false
	start := 0
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '`':
			inCode = !inCode
		case line[i] == '\\':
			i++
		case line[i] == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
	}
	return append(cells, strings.TrimSpace(line[start:]))
}

func isDelimiter(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, ":-") != "" {
			return false
		}
	}
	return true
}

var (
	code       = regexp.MustCompile("`([^`]+)`")
	metricName = regexp.MustCompile("^`([a-zA-Z_:][a-zA-Z0-9_:]*)`$")
)

// Metrics returns the metrics the tables list, by name, with their label names sorted: rows whose
// first cell is a metric name in backticks, in tables with a column "labels". A label cell lists
// label names in backticks, then after ":" or "=" their values; ";" starts another label.
func Metrics(tables []Table) (map[string][]string, error) {
	metrics := map[string][]string{}
	for _, t := range tables {
		col := slices.IndexFunc(t.Header, func(h string) bool { return strings.EqualFold(h, "labels") })
		for _, row := range t.Rows {
			m := metricName.FindStringSubmatch(row[0])
			if m == nil {
				continue
			}
			if _, dup := metrics[m[1]]; dup {
				return nil, fmt.Errorf("%s listed twice", m[1])
			}
			if col < 0 || col >= len(row) {
				return nil, fmt.Errorf("%s: no labels cell", m[1])
			}
			labels := []string{}
			for part := range strings.SplitSeq(row[col], ";") {
				if i := strings.IndexAny(part, ":="); i >= 0 {
					part = part[:i]
				}
				for _, l := range code.FindAllStringSubmatch(part, -1) {
					labels = append(labels, l[1])
				}
			}
			slices.Sort(labels)
			metrics[m[1]] = labels
		}
	}
	return metrics, nil
}

// MetricsUnder is Metrics of the tables under heading.
func MetricsUnder(markdown []byte, heading string) (map[string][]string, error) {
	tables, err := Tables(markdown, heading)
	if err != nil {
		return nil, err
	}
	return Metrics(tables)
}

// Reasons returns the Event reasons the tables whose first column is "reason" list: every name in
// backticks in that column.
func Reasons(tables []Table) []string {
	var reasons []string
	for _, t := range tables {
		if len(t.Header) == 0 || t.Header[0] != "reason" {
			continue
		}
		for _, row := range t.Rows {
			for _, r := range code.FindAllStringSubmatch(row[0], -1) {
				reasons = append(reasons, r[1])
			}
		}
	}
	slices.Sort(reasons)
	return slices.Compact(reasons)
}

// Recorder is a prometheus.Registerer that keeps what is registered through it.
type Recorder struct {
	prometheus.Registerer
	Collectors []prometheus.Collector
}

// Register registers c and keeps it.
func (r *Recorder) Register(c prometheus.Collector) error {
	r.Collectors = append(r.Collectors, c)
	return r.Registerer.Register(c)
}

// MustRegister registers cs and keeps them.
func (r *Recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// descFields reads a Desc's name and variable labels from its String form, the only way
// client_golang gives them out.
var descFields = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", .*, variableLabels: \{([^}]*)\}\}$`)

// Described returns the metrics cs describe, by name, with their label names sorted, whether or
// not they have series yet.
func Described(cs ...prometheus.Collector) (map[string][]string, error) {
	metrics := map[string][]string{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			m := descFields.FindStringSubmatch(d.String())
			if m == nil {
				return nil, fmt.Errorf("unreadable %s", d)
			}
			labels := []string{}
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			slices.Sort(labels)
			metrics[m[1]] = labels
		}
	}
	return metrics, nil
}
