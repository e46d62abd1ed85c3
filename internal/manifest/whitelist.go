package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// whitelistDoc is OpenKruise's SidecarSetPatchMetadataWhiteList (pkg/util/configuration), the
// value of the ConfigMap key.
type whitelistDoc struct {
	Rules []whitelistRule `json:"rules"`
}

type whitelistRule struct {
	Selector                  *metav1.LabelSelector `json:"selector,omitempty"`
	AllowedAnnotationKeyExprs []string              `json:"allowedAnnotationKeyExprs,omitempty"`
}

// Whitelist converts OpenKruise's kruise-configuration ConfigMap into the document the policies
// read as data.whitelist (docs/design.md): {"rules": [...], "defaultsAllowed": defaultsAllowed}.
//
// A nil ConfigMap, or one without the key SidecarSet_PatchPodMetadata_WhiteList, yields no "rules"
// at all, which the policies read as "whitelist not found"; a value without rules yields
// "rules": [], a whitelist that allows nothing. defaultsAllowed is the feature gate
// SidecarSetPatchPodMetadataDefaultsAllowed, which is not part of the ConfigMap.
//
// The value is decoded strictly (unknown and duplicate fields, wrong types are errors naming the
// ConfigMap, the key and the field). Regular expressions and selector operators are passed through
// unchecked: the policies judge them, and only for the rules that apply, as OpenKruise does.
// The returned errors are Errors with no Position; callers that know which file the ConfigMap came
// from may fill it in.
func Whitelist(cm *corev1.ConfigMap, defaultsAllowed bool) (map[string]any, error) {
	out := map[string]any{"defaultsAllowed": defaultsAllowed}
	if cm == nil {
		return out, nil
	}
	value, ok := cm.Data[v1beta1.PatchPodMetadataWhiteListKey]
	if !ok {
		return out, nil
	}
	var errs Errors
	fail := func(field, reason string) {
		path := "data[" + v1beta1.PatchPodMetadataWhiteListKey + "]"
		if field != "" {
			path = joinPath(path, field)
		}
		errs = append(errs, &Error{Position: Position{Item: -1}, Kind: "ConfigMap", Name: cm.Name, Field: path, Reason: reason})
	}
	var doc whitelistDoc
	data := []byte(value)
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		fail("", "expected a JSON object, got "+jsonValueName(t))
		return nil, errs
	}
	strictErrs, err := kjson.UnmarshalStrict(data, &doc)
	if isSyntax, offset := kjson.SyntaxErrorOffset(err); isSyntax {
		fail("", fmt.Sprintf("invalid JSON: line %d of the value: %s", lineAt(data, offset-1), strings.TrimPrefix(err.Error(), "json: ")))
	} else if err != nil {
		typeErrs, _ := typeErrors(data, reflect.TypeFor[whitelistDoc](), "")
		for _, fe := range typeErrs {
			fail(fe.field, fe.reason)
		}
	}
	for _, fe := range strictErrors(strictErrs) {
		fail(fe.field, fe.reason)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	// The generic form goes through JSON so that it holds only the types OPA reads natively.
	raw, err := json.Marshal(doc.Rules)
	if err != nil {
		return nil, err
	}
	var rules []any
	if err := json.Unmarshal(raw, &rules); err != nil {
		return nil, err
	}
	if rules == nil {
		rules = []any{}
	}
	out["rules"] = rules
	return out, nil
}
