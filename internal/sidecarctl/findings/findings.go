package findings

import (
	"cmp"
	"slices"

	"github.com/sidecarops/sidecarops/internal/manifest"
)

// The severities of check's findings (docs/cli.md documents them, and the rules in rules.go).
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
	// SeverityNotice: said, never failing the run, --strict or not (a policy's dryrun finding).
	SeverityNotice = "notice"
)

// Finding is one problem check reports. Also is the other object it is about, if any, whose
// disable annotation silences it as its own object's does. Refusal marks what a cluster refuses,
// which nothing silences.
type Finding struct {
	*manifest.Error
	Severity string
	Rule     string
	Also     *manifest.Object
	Refusal  bool
}

// Sort puts findings in input order — by source as read (sources first, in their order, then
// those only findings name), document, List item — each document's in the order they were found:
// what reading found (by line), then OpenKruise's rules in OpenKruise's order, the pods, the
// SidecarSet policies' findings by line.
func Sort(fs []Finding, sources []string) {
	rank := map[string]int{}
	note := func(source string) {
		if _, ok := rank[source]; !ok {
			rank[source] = len(rank)
		}
	}
	for _, s := range sources {
		note(s)
	}
	for _, f := range fs {
		note(f.Source)
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(rank[a.Source], rank[b.Source]), cmp.Compare(a.Doc, b.Doc),
			cmp.Compare(a.Item, b.Item))
	})
}
