package engine

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/internal/impact"
)

// tenancy is a SidecarSet policy reading every part of the input: the requester, the operation, the
// object as stored and the impact view.
var tenancy = map[string]string{
	".manifest": `{"revision":"tenancy-7","roots":["sidecarsets/tenancy"]}`,
	"tenancy/tenancy.rego": `package sidecarsets.tenancy

deny contains sprintf("%s may not inject into namespace %s", [input.userInfo.username, ns]) if {
	some ns, n in input.impact.namespaces
	not concat("", ["team:", n.labels.team]) in input.userInfo.groups
}

warn contains {"msg": "image is not pinned", "rule": "pinned", "field": "spec.containers[0].image"} if {
	not contains(input.sidecarSet.spec.containers[0].image, "@")
}

dryrun contains sprintf("%s %s of kind %s", [input.operation, input.sidecarSet.metadata.name, input.sidecarSet.kind]) if true
`,
}

func TestGovern(t *testing.T) {
	ss := sidecarSet("mesh", map[string]string{"app": "web"})
	s := snapshot(t, bundles.State{SidecarSets: []*v1beta1.SidecarSet{ss}}, adminBundle(t, tenancy))
	view := &impact.View{Namespaces: map[string]impact.Namespace{
		"a": {Labels: map[string]string{"team": "a"}},
		"b": {Labels: map[string]string{"team": "b"}},
	}}
	fs, err := s.Govern(context.Background(), Review{Operation: "CREATE", SidecarSet: ss, Impact: view,
		UserInfo: NewUserInfo(authenticationv1.UserInfo{Username: "alice", Groups: []string{"team:a"}})})
	require.NoError(t, err)
	assert.Equal(t, []Finding{
		{Rule: "tenancy", Action: ActionDeny, Message: "alice may not inject into namespace b"},
		{Rule: "tenancy/pinned", Action: ActionWarn, Message: "image is not pinned", Field: "spec.containers[0].image"},
		{Rule: "tenancy", Action: ActionDryRun, Message: "CREATE mesh of kind SidecarSet"},
	}, fs, "denials first; the kind the object is stored with, though the caller left it out")
	assert.Equal(t, "[tenancy/pinned] spec.containers[0].image: image is not pinned", fs[1].String())

	none, err := snapshot(t, bundles.State{SidecarSets: []*v1beta1.SidecarSet{ss}}).Govern(context.Background(), Review{Operation: "CREATE", SidecarSet: ss})
	require.NoError(t, err)
	assert.Empty(t, none, "no SidecarSet policy, no finding")
}

// The pod decisions' projection and determinism leave the SidecarSet policies out, so those may call
// what the pod path may not, and a pod policy that read them would break that: it is refused.
func TestSidecarSetPoliciesStayOffThePodPath(t *testing.T) {
	clock := map[string]string{
		".manifest": `{"roots":["sidecarsets/clock"]}`,
		"clock/clock.rego": `package sidecarsets.clock

warn contains "late" if time.now_ns() > 0

warn contains "whole input" if input
`,
	}
	s := snapshot(t, bundles.State{}, adminBundle(t, clock))
	assert.True(t, s.Deterministic(), "time.now_ns in a SidecarSet policy leaves pod decisions cacheable")
	assert.False(t, s.ReadsPod("spec", "volumes"), "a SidecarSet policy reading all of input widens nothing on the pod path")

	reader := map[string]string{
		".manifest":        `{"roots":["gates"]}`,
		"gates/gates.rego": "package gates\n\ndeny_injection contains \"x\" if data.sidecarsets.clock.warn\n",
	}
	_, err := new(Compiler).Snapshot(context.Background(), bundles.State{}, []*bundle.Bundle{adminBundle(t, clock), adminBundle(t, reader)})
	assert.ErrorContains(t, err, "reads data.sidecarsets.clock.warn: only SidecarSet policies")
}
