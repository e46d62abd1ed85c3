package migratecheck

import (
	"fmt"
	"io"

	"github.com/sidecarops/sidecarops/internal/migrate"
)

// pathB is what path B keeps running, and how (docs/migration.md).
const pathB = "OpenKruise keeps running with its pod webhook, sidecarops' pod webhook after it, and the fence keeps OpenKruise's manager off the SidecarSets (docs/migration.md)"

// Write prints r.
func Write(out io.Writer, r migrate.Report) {
	fmt.Fprintln(out, "Found:")
	for _, f := range r.Found {
		fmt.Fprintln(out, "  "+f)
	}
	switch {
	case r.Path == migrate.PathA:
		fmt.Fprintln(out, "Path A: nothing of OpenKruise but SidecarSet is in use; OpenKruise stops as a whole (docs/migration.md).")
	case len(r.InUse) > 0:
		fmt.Fprintln(out, "Path B: OpenKruise's other workloads are in use; "+pathB+":")
	default:
		fmt.Fprintln(out, "Path B: pods rely on OpenKruise's pod webhook, which path A would take away with OpenKruise; "+pathB+".")
	}
	for _, u := range r.InUse {
		fmt.Fprintln(out, "  "+u.String())
	}
	switch {
	case r.Kept() && len(r.Features) == 0:
		fmt.Fprintf(out, "Kept: OpenKruise's pod webhook %s.\n", r.KruisePodWebhook)
	case r.Kept():
		fmt.Fprintf(out, "Kept: OpenKruise's pod webhook %s, and with it (path A would lose these):\n", r.KruisePodWebhook)
	case len(r.Features) > 0:
		fmt.Fprintln(out, "Lost: OpenKruise's pod webhook is not registered, and with it:")
	}
	for _, f := range r.Features {
		fmt.Fprintln(out, "  "+f.String())
	}
	for _, blocking := range []bool{true, false} {
		title := "Blocking:"
		if !blocking {
			title = "Warnings:"
		}
		n := 0
		for _, f := range r.Findings {
			if f.Blocker != blocking {
				continue
			}
			if n == 0 {
				fmt.Fprintln(out, title)
			}
			n++
			fmt.Fprintf(out, "  %d. %s\n     fix: %s\n", n, f.Message, f.Fix)
		}
	}
	if !r.Blocked() {
		fmt.Fprintln(out, "Clear: nothing blocks the switch.")
	}
}
