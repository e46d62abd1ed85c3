package migratecheck

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sidecarops/sidecarops/internal/migrate"
)

func TestWrite(t *testing.T) {
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
			name: "path B, clear: the kinds in use, and what OpenKruise's pod webhook keeps doing",
			r: migrate.Report{
				Path:             migrate.PathB,
				InUse:            []migrate.Use{{Group: "apps.kruise.io", Kind: "CloneSet", Count: 3}, {Group: "policy.kruise.io", Kind: "PodUnavailableBudget", Count: 1}},
				KruisePodWebhook: "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
				Features:         []migrate.Feature{{Count: 1, What: "PodUnavailableBudget(s)", Does: "pod deletions held back"}},
				Found:            found,
			},
			want: `Found:
  OpenKruise's manager: Deployment kruise-system/kruise-controller-manager, 2 replica(s)
Path B: OpenKruise's other workloads are in use; OpenKruise keeps running with its pod webhook, sidecarops' pod webhook after it, and the fence keeps OpenKruise's manager off the SidecarSets (docs/migration.md):
  CloneSet.apps.kruise.io: 3
  PodUnavailableBudget.policy.kruise.io: 1
Kept: OpenKruise's pod webhook mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration), and with it (path A would lose these):
  1 PodUnavailableBudget(s): pod deletions held back
Clear: nothing blocks the switch.
`,
		},
		{
			name: "path B for pods alone, their launch order lost with PodWebhook=false",
			r: migrate.Report{
				Path:     migrate.PathB,
				Features: []migrate.Feature{{Count: 2, What: "pod(s) with a container launch order", Does: "their containers started in order"}},
				Found:    found,
				Findings: []migrate.Finding{{Message: "OpenKruise's pod webhook is not registered", Fix: "helm upgrade kruise"}},
			},
			want: `Found:
  OpenKruise's manager: Deployment kruise-system/kruise-controller-manager, 2 replica(s)
Path B: pods rely on OpenKruise's pod webhook, which path A would take away with OpenKruise; OpenKruise keeps running with its pod webhook, sidecarops' pod webhook after it, and the fence keeps OpenKruise's manager off the SidecarSets (docs/migration.md).
Lost: OpenKruise's pod webhook is not registered, and with it:
  2 pod(s) with a container launch order: their containers started in order
Warnings:
  1. OpenKruise's pod webhook is not registered
     fix: helm upgrade kruise
Clear: nothing blocks the switch.
`,
		},
		{
			name: "path B, OpenKruise's pod webhook kept, nothing relying on it",
			r: migrate.Report{
				Path:             migrate.PathB,
				InUse:            []migrate.Use{{Group: "apps.kruise.io", Kind: "CloneSet", Count: 1}},
				KruisePodWebhook: "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			},
			want: `Found:
Path B: OpenKruise's other workloads are in use; OpenKruise keeps running with its pod webhook, sidecarops' pod webhook after it, and the fence keeps OpenKruise's manager off the SidecarSets (docs/migration.md):
  CloneSet.apps.kruise.io: 1
Kept: OpenKruise's pod webhook mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration).
Clear: nothing blocks the switch.
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			Write(&out, tt.r)
			assert.Equal(t, tt.want, out.String())
		})
	}
}
