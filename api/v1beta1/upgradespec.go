package v1beta1

import (
	"encoding/json"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SidecarSetUpgradeSpec is one entry of a pod's kruise.io/sidecarset-hash and
// kruise.io/sidecarset-hash-without-image annotations (compat §1.11): which version of a
// SidecarSet's sidecars the pod runs. Field order and tags are OpenKruise's: the webhook writes
// these entries, the controller reads and rewrites them, and pods must not differ by who did.
//
// +kubebuilder:object:generate=false
type SidecarSetUpgradeSpec struct {
	UpdateTimestamp    metav1.Time `json:"updateTimestamp"`
	Hash               string      `json:"hash"`
	SidecarSetName     string      `json:"sidecarSetName"`
	SidecarList        []string    `json:"sidecarList"`
	ControllerRevision string      `json:"controllerRevision,omitempty"`
}

// ErrUpgradeSpecs says a hash annotation is neither form ParseUpgradeSpecs reads.
var ErrUpgradeSpecs = errors.New("neither a map of SidecarSet upgrade specs nor the legacy map of hashes")

// ParseUpgradeSpecs reads a hash annotation's value: the map sidecarSetName → spec, or the flat
// {"<name>":"<hash>"} that old OpenKruise versions wrote (W17, S8), whose entries get only hash and
// name. "" and JSON null are an empty map; anything else is ErrUpgradeSpecs with an empty map.
func ParseUpgradeSpecs(raw string) (map[string]SidecarSetUpgradeSpec, error) {
	specs := map[string]SidecarSetUpgradeSpec{}
	if raw == "" {
		return specs, nil
	}
	if err := json.Unmarshal([]byte(raw), &specs); err == nil {
		if specs == nil {
			specs = map[string]SidecarSetUpgradeSpec{}
		}
		return specs, nil
	}
	var flat map[string]string
	if err := json.Unmarshal([]byte(raw), &flat); err != nil {
		return map[string]SidecarSetUpgradeSpec{}, ErrUpgradeSpecs
	}
	specs = make(map[string]SidecarSetUpgradeSpec, len(flat))
	for name, h := range flat {
		specs[name] = SidecarSetUpgradeSpec{Hash: h, SidecarSetName: name}
	}
	return specs, nil
}
