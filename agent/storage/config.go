package storage

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TypeInKube is the only storage type: results go to Kubernetes objects.
const TypeInKube = "InKube"

// Config is a plugin's storageConfig.
type Config struct {
	Type   string        `json:"type"`
	InKube *InKubeConfig `json:"inKube,omitempty"`
}

// InKubeConfig says where in Kubernetes a result goes: the value to the pod's annotationKey,
// labelKey and condition conditionType (status from the result, reason its state), and to jsonPath
// (an RFC 6901 pointer to an object field) of target when given; markerPolicies mark the pod.
type InKubeConfig struct {
	AnnotationKey  string         `json:"annotationKey,omitempty"`
	LabelKey       string         `json:"labelKey,omitempty"`
	ConditionType  string         `json:"conditionType,omitempty"`
	Target         *Target        `json:"target,omitempty"`
	JSONPath       string         `json:"jsonPath,omitempty"`
	MarkerPolicies []MarkerPolicy `json:"markerPolicies,omitempty"`
}

// Target names any object through the dynamic client. Name and Namespace may use
// ${SELF:POD_NAME} and ${SELF:POD_NAMESPACE}; an empty namespace is a cluster-scoped object.
type Target struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Resource  string `json:"resource"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// MarkerPolicy marks the pod with labels and annotations while the result's state is State, e.g.
// idle → controller.kubernetes.io/pod-deletion-cost=-10 so a scale-down removes idle pods first.
type MarkerPolicy struct {
	State       string            `json:"state"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Record is one result to store. Value is what annotationKey, labelKey and jsonPath receive; State
// selects the marker policy and is the condition's reason; OK is the condition's status.
type Record struct {
	Value string
	State string
	OK    bool
}

// Self is the pod the agent runs in (from the downward API).
type Self struct {
	PodName      string
	PodNamespace string
}

// Expand substitutes ${SELF:POD_NAME} and ${SELF:POD_NAMESPACE}.
func (s Self) Expand(v string) string {
	return strings.NewReplacer("${SELF:POD_NAME}", s.PodName, "${SELF:POD_NAMESPACE}", s.PodNamespace).Replace(v)
}

// GVR is the target's resource.
func (t *Target) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: t.Group, Version: t.Version, Resource: t.Resource}
}

// Validate checks a storageConfig; p is its path in the configuration.
func (c *Config) Validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Type != TypeInKube {
		return append(errs, field.NotSupported(p.Child("type"), c.Type, []string{TypeInKube}))
	}
	k := c.InKube
	if k == nil {
		return append(errs, field.Required(p.Child("inKube"), "type InKube needs inKube"))
	}
	p = p.Child("inKube")
	if k.Target == nil && k.AnnotationKey == "" && k.LabelKey == "" && k.ConditionType == "" && len(k.MarkerPolicies) == 0 {
		errs = append(errs, field.Required(p, "one of annotationKey, labelKey, conditionType, target or markerPolicies"))
	}
	if k.AnnotationKey != "" {
		errs = append(errs, qualifiedName(p.Child("annotationKey"), k.AnnotationKey)...)
	}
	if k.LabelKey != "" {
		errs = append(errs, qualifiedName(p.Child("labelKey"), k.LabelKey)...)
	}
	if k.ConditionType != "" {
		errs = append(errs, conditionType(p.Child("conditionType"), k.ConditionType)...)
	}
	switch {
	case k.Target != nil:
		tp := p.Child("target")
		if k.Target.Version == "" {
			errs = append(errs, field.Required(tp.Child("version"), ""))
		}
		if k.Target.Resource == "" {
			errs = append(errs, field.Required(tp.Child("resource"), ""))
		}
		if k.Target.Name == "" {
			errs = append(errs, field.Required(tp.Child("name"), ""))
		}
		if _, err := ParsePointer(k.JSONPath); err != nil {
			errs = append(errs, field.Invalid(p.Child("jsonPath"), k.JSONPath, err.Error()))
		}
	case k.JSONPath != "":
		errs = append(errs, field.Forbidden(p.Child("jsonPath"), "jsonPath needs a target"))
	}
	seen := map[string]bool{}
	for i, m := range k.MarkerPolicies {
		mp := p.Child("markerPolicies").Index(i)
		if m.State == "" {
			errs = append(errs, field.Required(mp.Child("state"), ""))
		} else if seen[m.State] {
			errs = append(errs, field.Duplicate(mp.Child("state"), m.State))
		}
		seen[m.State] = true
		for key, v := range m.Labels {
			errs = append(errs, qualifiedName(mp.Child("labels").Key(key), key)...)
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(mp.Child("labels").Key(key), v, msg))
			}
		}
		for key := range m.Annotations {
			errs = append(errs, qualifiedName(mp.Child("annotations").Key(key), key)...)
		}
	}
	return errs
}

// conditionType refuses, at start, the condition types that config/agent-policy refuses at each
// write: one without a domain prefix, or of Kubernetes' own domains, is the kubelet's or the
// API's to set (Ready, DisruptionTarget, …), never an agent's.
func conditionType(p *field.Path, v string) field.ErrorList {
	errs := qualifiedName(p, v)
	if len(errs) > 0 {
		return errs
	}
	prefix, _, ok := strings.Cut(v, "/")
	if !ok {
		return field.ErrorList{field.Invalid(p, v, "must have a domain prefix, e.g. example.com/Probed: types without one are Kubernetes' own")}
	}
	for _, own := range []string{"k8s.io", "kubernetes.io"} {
		if prefix == own || strings.HasSuffix(prefix, "."+own) {
			return field.ErrorList{field.Invalid(p, v, "must not be in the "+own+" domain: those types are Kubernetes' own")}
		}
	}
	return nil
}

func qualifiedName(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// ParsePointer splits an RFC 6901 JSON pointer to an object field ("/spec/opsState") into
// unescaped tokens, for unstructured.NestedFieldNoCopy.
func ParsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return nil, fmt.Errorf("must be a JSON pointer to a field, like /spec/opsState")
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if t == "" {
			return nil, fmt.Errorf("empty token %d", i+1)
		}
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	return toks, nil
}
