package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	admissionmetrics "sigs.k8s.io/controller-runtime/pkg/webhook/admission/metrics"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The pod webhook's own AdmissionReview plumbing. controller-runtime's admission.Webhook reads an
// AdmissionReview three times (an encoding/json pass to sniff apiVersion and kind, the decode of the
// review, then the handler's decode of the pod) and encodes the answer by reflection; on the pod
// path, the hottest of sidecarops, that was more CPU than the decision and the injection together
// (docs/benchmarks.md). This handler decodes the review once, the pod staying raw bytes for the
// decision, and writes the answer by hand. It serves admission.k8s.io/v1 only, as the webhook
// configurations ask (config/webhook: admissionReviewVersions ["v1"]).

// maxReviewSize bounds a request body, as controller-runtime does: an AdmissionReview carries at
// most two objects of at most 3 MB each, plus less than 1 MB of the rest.
const maxReviewSize = 7 << 20

// reviewGVK is the only AdmissionReview version served.
var reviewGVK = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// podReview is what the pod webhook reads of an AdmissionReview. Fields it does not read (userInfo,
// oldObject, options) are skipped by the decoder, not decoded. A dry run is answered as any other
// request, without its one side effect (PodSecurity's Event).
type podReview struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Request    *reviewRequest `json:"request"`
}

// reviewRequest is the part of admissionv1.AdmissionRequest the pod webhook reads. Object is the
// request body's own bytes, not a copy: it is read only while the handler holds the body's buffer.
type reviewRequest struct {
	UID         types.UID                   `json:"uid"`
	Resource    metav1.GroupVersionResource `json:"resource"`
	SubResource string                      `json:"subResource"`
	Name        string                      `json:"name"`
	Namespace   string                      `json:"namespace"`
	Operation   admissionv1.Operation       `json:"operation"`
	DryRun      bool                        `json:"dryRun"`
	Span        span                        `json:"object"`
	Object      []byte                      `json:"-"`
}

// span is where a value lies in the decoded input. Decoding the object into a json.RawMessage
// copied the pod, a large part of the review's decoding (BenchmarkPodInjectorPerPod); its place in
// the body is all the handler needs.
type span struct{ from, to int64 }

func (s *span) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	// The value is the input's exact bytes without surrounding whitespace, and the offset is the
	// byte after it.
	s.to = dec.InputOffset()
	s.from = s.to - int64(len(v))
	return nil
}

// reviewResponse is an AdmissionResponse as the pod webhook answers it (its Result is always set,
// as controller-runtime sets it).
type reviewResponse struct {
	allowed  bool
	code     int32
	reason   metav1.StatusReason
	message  string
	patch    []jsonpatch.JsonPatchOperation
	warnings []string
}

func allowed(message string) reviewResponse {
	return reviewResponse{allowed: true, code: http.StatusOK, message: message}
}

func denied(message string) reviewResponse {
	return reviewResponse{code: http.StatusForbidden, reason: metav1.StatusReasonForbidden, message: message}
}

func errored(code int32, err error) reviewResponse {
	return reviewResponse{code: code, message: err.Error()}
}

// buffers are the request bodies and the encoded answers, reused across requests.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooled is the largest buffer given back to the pool: a rare huge pod must not pin its memory.
const maxPooled = 64 << 10

func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooled {
		b.Reset()
		buffers.Put(b)
	}
}

// ServeHTTP implements http.Handler: one pod admission. Every answer is HTTP 200 with an
// AdmissionReview, as controller-runtime answers: what went wrong is the response's status code.
// The exception is the server's Limits: no room for the admission is HTTP 429.
func (p *PodInjector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := buffers.Get().(*bytes.Buffer)
	defer putBuffer(body)
	// The body is read before room is taken for its admission, so a slow or stalled peer holds no
	// in-flight room of ordinary pods, only the room of the bytes it has sent, and only until the
	// body deadline; the room taken is the body's real size, not the size it declared (Limits).
	p.gate.bodyDeadline(w)
	bodyHeld, readErr, throttled := readBody(r, body, p.gate)
	defer p.gate.releaseBody(bodyHeld)
	if throttled {
		p.gate.refuse(w)
		return
	}
	if readErr == nil {
		held, ok := p.gate.acquire(int64(body.Len()))
		if !ok {
			p.gate.refuse(w)
			return
		}
		defer p.gate.release(held)
	}
	var uid types.UID
	resp := func() (resp reviewResponse) {
		if !p.panics {
			// As controller-runtime's admission.Webhook: counted, handed to the process's panic
			// handlers (which log it with its stack), answered with a 500.
			defer func() {
				if v := recover(); v != nil {
					admissionmetrics.WebhookPanics.WithLabelValues().Inc()
					for _, fn := range utilruntime.PanicHandlers {
						fn(r.Context(), v)
					}
					resp = errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", v))
				}
			}()
		}
		if readErr != nil {
			return *readErr
		}
		req, resp, ok := decodeReview(r, body.Bytes())
		if !ok {
			return resp
		}
		uid = req.UID
		return p.admitPod(r.Context(), req, time.Now())
	}()
	writeReview(w, uid, resp)
}

// writeReview answers an admission with the AdmissionReview of resp for uid.
func writeReview(w http.ResponseWriter, uid types.UID, resp reviewResponse) {
	out := buffers.Get().(*bytes.Buffer)
	defer putBuffer(out)
	out.Write(appendReview(out.AvailableBuffer(), uid, &resp))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes()) // a broken connection is the API server's to retry
}

// failReview answers a SidecarSet admission whose body could not be read as controller-runtime's
// handler would: an AdmissionReview carrying the error, without a uid (none was read).
func failReview(w http.ResponseWriter, resp reviewResponse) { writeReview(w, "", resp) }

// readBody reads r's body into body; when it cannot, the answer. Each step of the body is read
// into room g gives it first (gate.grow: the first step from the room of first steps, the rest
// from the path's large-body room), the buffer grown to exactly that room and filled as bytes
// arrive, so what a peer makes the server hold is what it sent plus one step, and counted: a
// declared Content-Length costs nothing. The room is returned, to be given back once the request
// is answered; throttled means there was none.
func readBody(r *http.Request, body *bytes.Buffer, g *gate) (held bodyRoom, resp *reviewResponse, throttled bool) {
	if r.Body == nil || r.Body == http.NoBody {
		e := errored(http.StatusBadRequest, errors.New("request body is empty"))
		return held, &e, false
	}
	defer r.Body.Close()
	for {
		// One byte past maxReviewSize is enough to know the body is too large.
		step := min(max(bodyStep, int64(body.Len())/2), maxReviewSize+1-int64(body.Len()))
		if body.Len() == 0 {
			step = firstStep
		}
		want := int64(body.Len()) + step
		if !g.grow(&held, want) {
			return held, nil, true
		}
		if int64(body.Cap()) < want {
			// Exactly the room taken: bytes.Buffer's own growth doubles, past what was taken.
			grown := make([]byte, body.Len(), want)
			copy(grown, body.Bytes())
			*body = *bytes.NewBuffer(grown)
		}
		free := body.AvailableBuffer()[:step]
		n, err := io.ReadFull(r.Body, free)
		body.Write(free[:n]) // in place: free is body's own spare capacity
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = nil // the whole body
		} else if err == nil && body.Len() <= maxReviewSize {
			continue // a full step: more may follow
		}
		if err != nil {
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
				err = errBodyTimeout
			}
			e := errored(http.StatusBadRequest, fmt.Errorf("reading the request: %w", err))
			return held, &e, false
		}
		if body.Len() > maxReviewSize {
			e := errored(http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewSize))
			return held, &e, false
		}
		return held, nil, false
	}
}

// decodeReview decodes the AdmissionReview of r from body; when it cannot, the answer.
func decodeReview(r *http.Request, body []byte) (*reviewRequest, reviewResponse, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return nil, errored(http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct)), false
	}
	// With the objects' decoder (decodeObject), case-sensitive as the API server's own decoder and
	// controller-runtime's. Duplicate names are let through here, the last one winning as with
	// encoding/json: the object's own are refused when it is decoded, with an answer that carries
	// the request's uid.
	var rv podReview
	if err := jsonv2.Unmarshal(body, &rv, reviewJSON); err != nil {
		return nil, errored(http.StatusBadRequest, fmt.Errorf("decoding the AdmissionReview: %w", err)), false
	}
	if rv.APIVersion != reviewGVK.GroupVersion().String() || rv.Kind != reviewGVK.Kind {
		return nil, errored(http.StatusBadRequest, fmt.Errorf("unsupported apiVersion %q kind %q: this webhook serves %s %s",
			rv.APIVersion, rv.Kind, reviewGVK.GroupVersion(), reviewGVK.Kind)), false
	}
	if rv.Request == nil {
		return nil, errored(http.StatusBadRequest, errors.New("the AdmissionReview has no request")), false
	}
	rv.Request.Object = body[rv.Request.Span.from:rv.Request.Span.to]
	return rv.Request, reviewResponse{}, true
}

// reviewJSON are the decoding options of the AdmissionReview around the objects.
var reviewJSON = jsonv2.JoinOptions(requestJSON, jsontext.AllowDuplicateNames(true))

// appendReview appends the AdmissionReview answering uid with resp, as encoding/json would write
// admissionv1.AdmissionReview{Response: ...} (field names, omitted empty fields, base64 patch).
func appendReview(b []byte, uid types.UID, resp *reviewResponse) []byte {
	b = append(b, `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":`...)
	b = appendString(b, string(uid))
	b = append(b, `,"allowed":`...)
	b = strconv.AppendBool(b, resp.allowed)
	b = append(b, `,"status":{"metadata":{}`...)
	if resp.message != "" {
		b = append(b, `,"message":`...)
		b = appendString(b, resp.message)
	}
	if resp.reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, string(resp.reason))
	}
	b = append(b, `,"code":`...)
	b = strconv.AppendInt(b, int64(resp.code), 10)
	b = append(b, '}')
	if len(resp.patch) > 0 {
		w := patchWriters.Get().(*patchWriter)
		defer w.release()
		if err := w.marshal(resp.patch); err != nil {
			// The patch holds the pod's own types; failing to encode them is a server fault.
			return appendReview(b[:0], uid, &reviewResponse{code: http.StatusInternalServerError,
				message: "unable to encode the patch: " + err.Error()})
		}
		b = append(b, `,"patch":"`...)
		b = base64.StdEncoding.AppendEncode(b, w.buf.Bytes())
		b = append(b, `","patchType":"JSONPatch"`...)
	}
	if len(resp.warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i, w := range resp.warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, w)
		}
		b = append(b, ']')
	}
	return append(b, "}}\n"...)
}

// patchWriter encodes an RFC 6902 patch as json.Marshal would, one operation at a time: each
// operation's MarshalJSON output would otherwise be checked and compacted again by the encoder. The
// values go through one json.Encoder into one buffer, where json.Marshal would return each in a
// slice of its own; both are kept between requests (patchWriters).
type patchWriter struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var patchWriters = sync.Pool{New: func() any {
	w := &patchWriter{}
	w.enc = json.NewEncoder(&w.buf) // escapes HTML, as json.Marshal does
	return w
}}

// maxPooledPatch bounds what a pooled writer keeps: an unusually large patch is not held onto.
const maxPooledPatch = 64 << 10

func (w *patchWriter) release() {
	if w.buf.Cap() <= maxPooledPatch {
		w.buf.Reset()
		patchWriters.Put(w)
	}
}

func (w *patchWriter) marshal(ops []jsonpatch.JsonPatchOperation) error {
	w.buf.Reset()
	w.buf.WriteByte('[')
	for i := range ops {
		op := &ops[i]
		if i > 0 {
			w.buf.WriteByte(',')
		}
		w.buf.Write(appendString(append(w.buf.AvailableBuffer(), `{"op":`...), op.Operation))
		w.buf.Write(appendString(append(w.buf.AvailableBuffer(), `,"path":`...), op.Path))
		// As the operation's own MarshalJSON: add and replace always carry a value, null included.
		if op.Value != nil || op.Operation == "add" || op.Operation == "replace" {
			w.buf.WriteString(`,"value":`)
			if err := w.enc.Encode(op.Value); err != nil {
				return err
			}
			w.buf.Truncate(w.buf.Len() - 1) // the newline Encode ends each value with
		}
		w.buf.WriteByte('}')
	}
	w.buf.WriteByte(']')
	return nil
}

// appendString appends s as a JSON string, escaped as encoding/json escapes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
