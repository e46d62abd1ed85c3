package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	apixv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// conversionReviewGVK is the only ConversionReview version served (config/crd's
// conversionReviewVersions).
var conversionReviewGVK = apixv1.SchemeGroupVersion.WithKind("ConversionReview")

// conversionReview is what checkConversionReview reads of a ConversionReview.
type conversionReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID types.UID `json:"uid"`
	} `json:"request"`
}

// checkConversionReview sees a /convert body before controller-runtime's conversion handler, which
// answers a body it cannot decode with a bare 400 and takes the last of two members of the same
// name, as encoding/json does. A review that is not one is answered 400 with what is wrong; one
// with a member written twice anywhere, with a failed conversion naming it, as the pod path refuses
// them: of the two values, the one the API server meant is not known.
func checkConversionReview(w http.ResponseWriter, body []byte) bool {
	var rv conversionReview
	if err := jsonv2.Unmarshal(body, &rv, reviewJSON); err != nil {
		http.Error(w, fmt.Sprintf("decoding the ConversionReview: %v", err), http.StatusBadRequest)
		return false
	}
	if rv.APIVersion != conversionReviewGVK.GroupVersion().String() || rv.Kind != conversionReviewGVK.Kind {
		http.Error(w, fmt.Sprintf("unsupported apiVersion %q kind %q: this webhook serves %s %s",
			rv.APIVersion, rv.Kind, conversionReviewGVK.GroupVersion(), conversionReviewGVK.Kind), http.StatusBadRequest)
		return false
	}
	if rv.Request == nil {
		http.Error(w, "the ConversionReview has no request", http.StatusBadRequest)
		return false
	}
	if err := jsontext.NewDecoder(bytes.NewReader(body), requestJSON).SkipValue(); err != nil {
		writeConversionFailure(w, rv.Request.UID, fmt.Errorf("decoding the ConversionReview: %w", err))
		return false
	}
	return true
}

// writeConversionFailure answers uid's conversion as failed with err, as controller-runtime's handler
// answers a conversion that fails: HTTP 200, the reason in the response's result.
func writeConversionFailure(w http.ResponseWriter, uid types.UID, err error) {
	rv := apixv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: conversionReviewGVK.GroupVersion().String(), Kind: conversionReviewGVK.Kind},
		Response: &apixv1.ConversionResponse{UID: uid, Result: metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rv) // a broken connection is the API server's to retry
}

// failConversion answers a /convert body that could not be read: no uid was read, so a plain HTTP
// error with its reason.
func failConversion(w http.ResponseWriter, resp reviewResponse) {
	http.Error(w, resp.message, int(resp.code))
}
