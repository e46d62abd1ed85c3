// Package randomobjects fills Kubernetes objects and SidecarSets of both versions at random, the way
// Kubernetes' own round-trip tests fill them (apimachinery's fuzzer with metafuzzer's ObjectMeta,
// quantities and times that survive encoding), for property tests. Only tests import it.
package randomobjects

import (
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/randfill"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Filler fills objects from seed: a field is nil one time in five, a list or map has up to three
// elements, so that nil, empty and populated collections all come up.
func Filler(tb testing.TB, seed int64) *randfill.Filler {
	tb.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, v1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			tb.Fatal(err)
		}
	}
	return fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), serializer.NewCodecFactory(scheme)).NilChance(0.2).NumElements(0, 3)
}
