package hashes

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/vectors"
)

func plain(name, image string) v1beta1.SidecarContainer {
	return v1beta1.SidecarContainer{Container: corev1.Container{Name: name, Image: image}}
}

func native(name, image string) v1beta1.SidecarContainer {
	c := plain(name, image)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func ss(containers, inits []v1beta1.SidecarContainer) *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{Containers: containers, InitContainers: inits}}
}

// Vectors from compat §1.9 (asserted by OpenKruise's tests); JSON and hashes copied from docs/openkruise-compat.md §1.9.
func TestVectors(t *testing.T) {
	cases := []struct {
		name            string
		ss              *v1beta1.SidecarSet
		json            string
		hash            string
		jsonNoImage     string
		hashWithoutImg  string
		skipNoImageJSON bool
	}{
		{
			name:           "one container",
			ss:             ss([]v1beta1.SidecarContainer{plain("container1", "test-image")}, nil),
			json:           `{"containers":[{"name":"container1","image":"test-image","resources":{},"upgradeStrategy":{},"shareVolumePolicy":{}}]}`,
			hash:           "w26c4x8fz245642fdv499b464248f974xddx4x55z5dw55bc6x66464fxz77dc78",
			jsonNoImage:    `{"containers":[{"name":"container1","resources":{},"upgradeStrategy":{},"shareVolumePolicy":{}}]}`,
			hashWithoutImg: "8wzddb4dvv9c6x8zdc77z4z75987424f457dfv6724ddw6zbdx467wz5x24fc759",
		},
		{
			name: "container plus native initContainer",
			ss: ss([]v1beta1.SidecarContainer{plain("container1", "test-image")},
				[]v1beta1.SidecarContainer{native("container1", "test-image")}),
			json: `{"containers":[{"name":"container1","image":"test-image","resources":{},"upgradeStrategy":{},"shareVolumePolicy":{}}],` +
				`"initContainers":[{"name":"container1","image":"test-image","resources":{},"restartPolicy":"Always","upgradeStrategy":{},"shareVolumePolicy":{}}]}`,
			hash: "4xwx4d4844vd4v9x79wb4xbxf4xb29475cc4446v8cz2c2f2f5c5bw448vd42z8w",
			jsonNoImage: `{"containers":[{"name":"container1","resources":{},"upgradeStrategy":{},"shareVolumePolicy":{}}],` +
				`"initContainers":[{"name":"container1","resources":{},"restartPolicy":"Always","upgradeStrategy":{},"shareVolumePolicy":{}}]}`,
			hashWithoutImg: "5725fw8bwbx249bw57v5892c847dzf48bww9zb7c86xb95264fdz26654847b2c8",
		},
		{
			name: "defaulted dns-f",
			ss:   ss([]v1beta1.SidecarContainer{vectors.DNSF()}, nil),
			json: `{"containers":[{"name":"dns-f","image":"dns:1.0","resources":{},"terminationMessagePath":"/dev/termination-log",` +
				`"terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","podInjectPolicy":"BeforeAppContainer",` +
				`"upgradeStrategy":{"upgradeType":"ColdUpgrade"},"shareVolumePolicy":{"type":"disabled"}}]}`,
			hash: "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684",
			jsonNoImage: `{"containers":[{"name":"dns-f","resources":{},"terminationMessagePath":"/dev/termination-log",` +
				`"terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","podInjectPolicy":"BeforeAppContainer",` +
				`"upgradeStrategy":{"upgradeType":"ColdUpgrade"},"shareVolumePolicy":{"type":"disabled"}}]}`,
			hashWithoutImg: "82684vwf9d4cb4wz4vffx4ddfbb47ww4z4wwxdbwb8w2zbb7zvf4524cdd49bv94",
		},
		{
			// Not asserted by OpenKruise; computed from the algorithm in compat §1.9.
			name:           "initContainers only, none native",
			ss:             ss(nil, []v1beta1.SidecarContainer{plain("init", "busybox")}),
			json:           `{"containers":null}`,
			hash:           "x5vwx9w6vv4dv72c9w4c2f6v74fbwx545b45bbfz6z2dvf8w887xw86fvcb4cf48",
			jsonNoImage:    `{"containers":null}`,
			hashWithoutImg: "x5vwx9w6vv4dv72c9w4c2f6v74fbwx545b45bbfz6z2dvf8w887xw86fvcb4cf48",
		},
		{
			name:           "empty spec",
			ss:             &v1beta1.SidecarSet{},
			json:           `{"containers":null}`,
			hash:           "x5vwx9w6vv4dv72c9w4c2f6v74fbwx545b45bbfz6z2dvf8w887xw86fvcb4cf48",
			jsonNoImage:    `{"containers":null}`,
			hashWithoutImg: "x5vwx9w6vv4dv72c9w4c2f6v74fbwx545b45bbfz6z2dvf8w887xw86fvcb4cf48",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.ss.DeepCopy()

			enc, err := Encode(tc.ss.Spec.Containers, tc.ss.Spec.InitContainers)
			require.NoError(t, err)
			assert.Equal(t, tc.json, string(enc))
			encNoImage, err := Encode(withoutImages(tc.ss.Spec.Containers), withoutImages(tc.ss.Spec.InitContainers))
			require.NoError(t, err)
			assert.Equal(t, tc.jsonNoImage, string(encNoImage))

			h, err := SidecarSetHash(tc.ss)
			require.NoError(t, err)
			assert.Equal(t, tc.hash, h)
			h, err = SidecarSetHashWithoutImage(tc.ss)
			require.NoError(t, err)
			assert.Equal(t, tc.hashWithoutImg, h)

			assert.Equal(t, before, tc.ss, "hashing must not modify the SidecarSet")
		})
	}
}

func TestNonNativeInitContainersDoNotChangeHash(t *testing.T) {
	base := ss([]v1beta1.SidecarContainer{plain("container1", "test-image")}, nil)
	withInit := ss([]v1beta1.SidecarContainer{plain("container1", "test-image")},
		[]v1beta1.SidecarContainer{plain("init", "busybox:1")})
	a, err := SidecarSetHash(base)
	require.NoError(t, err)
	b, err := SidecarSetHash(withInit)
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

func TestImageOnlyChangeKeepsHashWithoutImage(t *testing.T) {
	v1 := ss([]v1beta1.SidecarContainer{vectors.DNSF()}, nil)
	v2 := v1.DeepCopy()
	v2.Spec.Containers[0].Image = "dns:2.0"
	h1, _ := SidecarSetHash(v1)
	h2, _ := SidecarSetHash(v2)
	assert.NotEqual(t, h1, h2)
	w1, _ := SidecarSetHashWithoutImage(v1)
	w2, _ := SidecarSetHashWithoutImage(v2)
	assert.Equal(t, w1, w2)
}

func TestNil(t *testing.T) {
	_, err := SidecarSetHash(nil)
	assert.Error(t, err)
	_, err = SidecarSetHashWithoutImage(nil)
	assert.Error(t, err)
}
