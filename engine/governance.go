package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/tidwall/gjson"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/impact"
)

// Review is the input of the administrators' SidecarSet policies (docs/governing.md, "Input").
type Review struct {
	// Operation is the admission operation: CREATE or UPDATE.
	Operation string `json:"operation"`
	// UserInfo is the requester's, as the API server authenticated it.
	UserInfo UserInfo `json:"userInfo"`
	// SidecarSet is the object as it will be stored: defaulted, in v1beta1.
	SidecarSet *v1beta1.SidecarSet `json:"sidecarSet"`
	// OldSidecarSet is the stored object an UPDATE replaces (defaulted, v1beta1); nil on CREATE.
	OldSidecarSet *v1beta1.SidecarSet `json:"oldSidecarSet,omitempty"`
	// Impact is SidecarSet's impact view; nil where none is known.
	Impact *impact.View `json:"impact,omitempty"`
}

// UserInfo is authentication/v1's, every field present: a policy testing a group against a
// requester without groups then reads an empty list, not an undefined one that would make its
// whole rule undefined.
type UserInfo struct {
	Username string                                 `json:"username"`
	UID      string                                 `json:"uid"`
	Groups   []string                               `json:"groups"`
	Extra    map[string]authenticationv1.ExtraValue `json:"extra"`
}

// NewUserInfo is u as the policies read it.
func NewUserInfo(u authenticationv1.UserInfo) UserInfo {
	out := UserInfo{Username: u.Username, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	if out.Groups == nil {
		out.Groups = []string{}
	}
	if out.Extra == nil {
		out.Extra = map[string]authenticationv1.ExtraValue{}
	}
	return out
}

// The enforcement actions of SidecarSet policy findings.
const (
	ActionDeny   = "deny"
	ActionWarn   = "warn"
	ActionDryRun = "dryrun"
)

// Finding is one finding of the SidecarSet policies.
type Finding struct {
	// Rule names the policy (its package under sidecarsets), then "/" and its own rule if it names one.
	Rule string `json:"rule"`
	// Action is ActionDeny, ActionWarn or ActionDryRun.
	Action  string `json:"action"`
	Message string `json:"message"`
	// Field is the field the finding is about, when the policy names one.
	Field string `json:"field,omitempty"`
}

// String is the finding as admission reports it.
func (f Finding) String() string {
	if f.Field == "" {
		return fmt.Sprintf("[%s] %s", f.Rule, f.Message)
	}
	return fmt.Sprintf("[%s] %s: %s", f.Rule, f.Field, f.Message)
}

var sidecarSetTypeMeta = v1beta1.GroupVersion.WithKind("SidecarSet")

// Govern evaluates the administrators' SidecarSet policies on r: every finding, denials first, then
// by rule and message. None when no bundle holds a SidecarSet policy.
func (s *Snapshot) Govern(ctx context.Context, r Review) ([]Finding, error) {
	r.SidecarSet = typed(r.SidecarSet)
	r.OldSidecarSet = typed(r.OldSidecarSet)
	// Through JSON and gjson rather than ast.InterfaceToValue, whose round trip through Go maps took
	// most of an admission with a large impact view (BenchmarkSidecarSetValidator).
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("engine: SidecarSet policies' input: %w", err)
	}
	rs, err := s.govern.Eval(ctx, rego.EvalParsedInput(jsonValue(gjson.ParseBytes(raw))), rego.EvalMetrics(noMetrics), rego.EvalExternalCancel(ctxCancel{ctx}))
	if err != nil {
		return nil, fmt.Errorf("engine: %s: %w", governQuery, err)
	}
	var out []Finding
	if len(rs) > 0 && len(rs[0].Expressions) > 0 {
		if err := decode(rs[0].Expressions[0].Value, &out); err != nil {
			return nil, fmt.Errorf("engine: %s result: %w", governQuery, err)
		}
	}
	order := map[string]int{ActionDeny: 0, ActionWarn: 1, ActionDryRun: 2}
	slices.SortFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(order[a.Action], order[b.Action]), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Message, b.Message), cmp.Compare(a.Field, b.Field))
	})
	return out, nil
}

// typed is ss with the apiVersion and kind it is stored with, which policies may read.
func typed(ss *v1beta1.SidecarSet) *v1beta1.SidecarSet {
	if ss == nil || ss.GroupVersionKind() == sidecarSetTypeMeta {
		return ss
	}
	c := *ss
	c.SetGroupVersionKind(sidecarSetTypeMeta)
	return &c
}
