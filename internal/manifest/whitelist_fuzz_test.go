package manifest

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// FuzzWhitelist feeds arbitrary values of OpenKruise's whitelist key to the conversion the loader
// and sidecarctl run on every kruise-configuration ConfigMap: it must answer a document with a
// "rules" list or errors naming the ConfigMap and the key, never panic.
func FuzzWhitelist(f *testing.F) {
	f.Add(`{"rules":[{"selector":{"matchLabels":{"app":"web"}},"allowedAnnotationKeyExprs":["^example\\.com/"]}]}`)
	f.Add(`{"rules":[]}`)
	f.Add(`{"rules":[{"selector":{"matchExpressions":[{"key":"a","operator":"In","values":["b"]}]}}],"rules":[]}`)
	f.Add(`[]`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, value string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1beta1.KruiseConfigurationName},
			Data: map[string]string{v1beta1.PatchPodMetadataWhiteListKey: value}}
		doc, err := Whitelist(cm, false)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error of type %T: %v", err, err)
			}
			for _, e := range es {
				if e.Name != v1beta1.KruiseConfigurationName || e.Kind != "ConfigMap" {
					t.Fatalf("error does not name the ConfigMap: %v", e)
				}
			}
			return
		}
		if _, ok := doc["rules"].([]any); !ok {
			t.Fatalf("a whitelist without a rules list: %#v", doc)
		}
	})
}
