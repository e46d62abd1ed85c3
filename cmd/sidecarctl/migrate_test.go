package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sidecarops/sidecarops/internal/migrate"
)

func TestMigratePrintReport(t *testing.T) {
	found := []string{"OpenKruise's manager: Deployment kruise-system/kruise-controller-manager, 2 replica(s)"}
	tests := []struct {
		name string
		r    migrate.Report
		want string
	}{
		{
			name: "path A, blocked",
			r: migrate.Report{Path: migrate.PathA, Found: found, Findings: []migrate.Finding{
				{Blocker: true, Message: "OpenKruise's controller runs", Fix: "kubectl scale"},
				{Message: "the history is in kruise-system", Fix: "--revision-namespace=kruise-system"},
			}},
			want: `Found:
  OpenKruise's manager: Deployment kruise-system/kruise-controller-manager, 2 replica(s)
Path A: nothing of OpenKruise but SidecarSet is in use; OpenKruise stops as a whole (docs/migration.md).
Blocking:
  1. OpenKruise's controller runs
     fix: kubectl scale
Warnings:
  1. the history is in kruise-system
     fix: --revision-namespace=kruise-system
`,
		},
		{
			name: "path B, clear: the kinds in use and what goes with the pod webhook",
			r: migrate.Report{
				Path:   migrate.PathB,
				InUse:  []migrate.Use{{Group: "apps.kruise.io", Kind: "CloneSet", Count: 3}, {Group: "policy.kruise.io", Kind: "PodUnavailableBudget", Count: 1}},
				Losses: []string{"1 PodUnavailableBudget(s) no longer hold back pod deletions"},
				Found:  found,
			},
			want: `Found:
  OpenKruise's manager: Deployment kruise-system/kruise-controller-manager, 2 replica(s)
Path B: OpenKruise's other workloads are in use; OpenKruise keeps running with PodWebhook=false, and the fence keeps it off the SidecarSets (docs/migration.md):
  CloneSet.apps.kruise.io: 3
  PodUnavailableBudget.policy.kruise.io: 1
What goes with OpenKruise's pod webhook (if these pods need it, keep OpenKruise's SidecarSet for now: docs/decisions.md D10):
  1 PodUnavailableBudget(s) no longer hold back pod deletions
Clear: nothing blocks the switch.
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			printReport(&out, tt.r)
			assert.Equal(t, tt.want, out.String())
		})
	}
}
