package webhook

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/sidecarset/versions"
)

// Paths the handlers are served at; the webhook configurations must name the same.
const (
	PodPath                = "/mutate-pod"
	SidecarSetDefaultPath  = "/mutate-apps-kruise-io-v1alpha1-sidecarset"
	SidecarSetValidatePath = "/validate-apps-kruise-io-v1alpha1-sidecarset"
	// ConvertPath serves the SidecarSet CRD's conversion between v1alpha1 and v1beta1.
	ConvertPath = "/convert"
)

// Snapshots serves the policy state in force; *engine.Engine satisfies it. Current returns nil until
// the first snapshot is loaded.
type Snapshots interface {
	Current() *engine.Snapshot
}

// errNotLoaded is answered, with 503, while no snapshot has been loaded.
var errNotLoaded = errors.New("policies not loaded yet")

// current is the one snapshot a request works with; nil when there is none (or no source at all,
// so that a handler built without Snapshots denies instead of panicking).
func current(s Snapshots) *engine.Snapshot {
	if s == nil {
		return nil
	}
	return s.Current()
}

// Registrar is where Register mounts the handlers; Server and controller-runtime's webhook.Server
// are ones.
type Registrar interface {
	Register(path string, hook http.Handler)
}

// Handlers are the three admission handlers. A nil one is not mounted by Register.
type Handlers struct {
	PodInjector *PodInjector
	Defaulter   *SidecarSetDefaulter
	Validator   *SidecarSetValidator
	// Converter is the CRD conversion webhook (controller-runtime's, over the API types'
	// ConvertTo/ConvertFrom); nil: not mounted.
	Converter http.Handler
	// Limits bound the requests of every path, each path apart (the zero value: the defaults).
	Limits Limits
	// Metrics count the requests Limits refuse (nil: not counted).
	Metrics *Metrics
}

// NewHandlers wires the three handlers to one snapshot source and one set of metrics (nil: none).
// decisionLog receives one line per pod decision and per SidecarSet the policies were asked about;
// the zero Logger turns it off. Pod injection uses
// the wall clock and math/rand/v2.
func NewHandlers(snapshots Snapshots, m *Metrics, decisionLog logr.Logger) Handlers {
	return Handlers{
		PodInjector: &PodInjector{Snapshots: snapshots, Metrics: m, DecisionLog: decisionLog},
		Defaulter:   &SidecarSetDefaulter{Metrics: m},
		Validator:   &SidecarSetValidator{Snapshots: snapshots, Metrics: m, DecisionLog: decisionLog},
		Metrics:     m,
	}
}

// Register mounts the handlers at their paths: the pod injector as the http.Handler it is (its own
// AdmissionReview decoding and encoding, admission.k8s.io/v1, panic recovery), the SidecarSet
// handlers wrapped in controller-runtime's admission.Webhook. controller-runtime's server adds its
// request metrics to all of them. Each path has its own rooms of Limits; the room of first steps
// is shared.
func Register(server Registrar, h Handlers) {
	gs := newGates(h.Limits, h.Metrics)
	if h.PodInjector != nil {
		h.PodInjector.gate = gs.of(PodPath)
		server.Register(PodPath, h.PodInjector)
	}
	if h.Defaulter != nil {
		server.Register(SidecarSetDefaultPath, gs.of(SidecarSetDefaultPath).wrap(&admission.Webhook{Handler: h.Defaulter}, failReview, nil))
	}
	if h.Validator != nil {
		server.Register(SidecarSetValidatePath, gs.of(SidecarSetValidatePath).wrap(&admission.Webhook{Handler: h.Validator}, failReview, nil))
	}
	if h.Converter != nil {
		server.Register(ConvertPath, gs.of(ConvertPath).wrap(h.Converter, failConversion, checkConversionReview))
	}
}

// decodeObject decodes one object of the request. The API server sends JSON it serialised itself.
// The decoder is JSON v2's (go-json-experiment/json, what Go ships as encoding/json/v2 behind
// GOEXPERIMENT=jsonv2): it reads a pod with much less CPU than encoding/json's reflection
// (docs/benchmarks.md, "The webhook handler's decoders"), and by default it is what the pod path
// needs:
//   - case-sensitive, as the API server's own decoder: a field spelled with other capitals is not
//     mistaken for a real one;
//   - duplicate member names are refused, anywhere in the object: the policies read the object's
//     bytes with gjson, which takes the first of two, and a decoder taking the last would let a
//     crafted object be decided on one value and injected with another. The API server never sends
//     one;
//   - unknown fields are ignored, as a client of an older API version must.
//
// Invalid UTF-8 is replaced by U+FFFD, as encoding/json does, so that no object decodes to other
// values than it did (webhook's TestDecodersAgree compares the two decoders).
func decodeObject(raw []byte, what string, into any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("the request has no %s", what)
	}
	if err := json.Unmarshal(raw, into, requestJSON); err != nil {
		return fmt.Errorf("decoding the %s: %w", what, err)
	}
	return nil
}

// requestJSON are the decoding options of everything the webhooks read (decodeObject).
var requestJSON = jsontext.AllowInvalidUTF8(true)

// sidecarSetKind is the kind the SidecarSet handlers serve, in both versions (package versions).
var sidecarSetKind = v1beta1.GroupVersion.WithKind("SidecarSet")

// decodeSidecarSetRequest is the common start of both SidecarSet handlers: requests they let through
// untouched (subresources — status updates by the controller must never be blocked by spec rules —
// and operations other than CREATE and UPDATE, compat §1.8) get an Allowed response; anything but a
// SidecarSet of a served version, which could not be decoded faithfully (fields of another version
// would be dropped by the patch or go unvalidated), a 400; otherwise the object as written.
func decodeSidecarSetRequest(req admission.Request) (versions.Written, *admission.Response) {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		r := admission.Allowed("")
		return versions.Written{}, &r
	}
	w, err := decodeSidecarSet(req.Kind, req.Object.Raw, "SidecarSet")
	if err != nil {
		return versions.Written{}, admissionError(http.StatusBadRequest, err)
	}
	return w, nil
}

// decodeSidecarSet decodes one SidecarSet of the request, of the kind and version the request names.
func decodeSidecarSet(k metav1.GroupVersionKind, raw []byte, what string) (versions.Written, error) {
	if k.Group != sidecarSetKind.Group || k.Kind != sidecarSetKind.Kind {
		return versions.Written{}, fmt.Errorf("unsupported kind %q in group %q: this webhook serves %s", k.Kind, k.Group, sidecarSetKind.GroupKind())
	}
	obj, err := versions.New(k.Version)
	if err != nil {
		return versions.Written{}, err
	}
	if err := decodeObject(raw, what, obj); err != nil {
		return versions.Written{}, err
	}
	return versions.Of(obj)
}

func admissionError(code int32, err error) *admission.Response {
	r := admission.Errored(code, err)
	return &r
}
