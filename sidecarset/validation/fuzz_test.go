package validation

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// FuzzSidecarSet checks that validation never panics, on raw and on defaulted input, as a new
// object and as an update of the base fixture, and never modifies its input. `go test` runs the
// seeds only.
func FuzzSidecarSet(f *testing.F) {
	seed, err := json.Marshal(base())
	require.NoError(f, err)
	f.Add(seed)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"metadata":{"name":"x","annotations":{"apps.kruise.io/sidecarset-canary":"true","apps.kruise.io/sidecarset-base":"test-sidecarset"}},` +
		`"spec":{"selector":{"matchExpressions":[{"key":"a","operator":"Bad"}]},"updateStrategy":{"type":"RollingUpdate","partition":"x%",` +
		`"priorityStrategy":{"weightPriority":[{"weight":1,"matchSelector":{}}]},"scatterStrategy":[{"key":""}]},` +
		`"injectionStrategy":{"revision":{"policy":"x"}},"initContainers":[{"name":"i","restartPolicy":"Always","resourcesPolicy":{"resourcesExpr":{}}}],` +
		`"containers":[{"name":"c","ports":[{}],"env":[{"name":"","valueFrom":{}}],"volumeMounts":[{}],"volumeDevices":[{}],` +
		`"livenessProbe":{},"lifecycle":{"preStop":{}},"transferEnv":[{"sourceContainerNameFrom":{"fieldRef":{"fieldPath":"metadata.labels['x"}}}],` +
		`"resourcesPolicy":{"targetContainersMode":"sum","resourcesExpr":{"limits":{"cpu":"max((("}}}}],` +
		`"volumes":[{"name":"v","projected":{"sources":[{}]}},{"name":"v","hostPath":{"path":"../x","type":"bad"}}],` +
		`"patchPodMetadata":[{},{"annotations":{"k":"v"}},{"annotations":{"k":"v"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ss v1beta1.SidecarSet
		if json.Unmarshal(data, &ss) != nil {
			return
		}
		others := NewStaticLookup(base())
		for _, old := range []*v1beta1.SidecarSet{nil, base()} {
			before := ss.DeepCopy()
			_ = SidecarSet(&ss, old, testRevisions(), others)
			require.Equal(t, before, &ss)
		}
		defaults.SidecarSet(&ss)
		_ = SidecarSet(&ss, base(), testRevisions(), others)
	})
}
