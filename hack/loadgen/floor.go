package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// codecRoundTrip is the floor of one admission: the AdmissionReview decoded with the pod kept raw
// (RawExtension), and a response review carrying patch encoded, with encoding/json as a webhook on
// controller-runtime reads and writes its JSON. (The pod webhook's own codec, JSON v2 and an answer
// written by hand, has gone below it: docs/benchmarks.md, "The webhook handler's decoders".)
func codecRoundTrip(body, patch []byte) error {
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil {
		return err
	}
	if in.Request == nil || len(in.Request.Object.Raw) == 0 {
		return fmt.Errorf("the AdmissionReview has no request object")
	}
	out := admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true}}
	if len(patch) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		out.Response.PatchType, out.Response.Patch = &pt, patch
	}
	_, err := json.Marshal(&out)
	return err
}

// measure runs f under testing.Benchmark (about a second) after checking it once, so a failure is
// reported instead of timed.
func measure(f func() error) (benchFigure, error) {
	if err := f(); err != nil {
		return benchFigure{}, err
	}
	var failed error
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := f(); err != nil {
				failed = err
				b.FailNow()
			}
		}
	})
	if failed != nil {
		return benchFigure{}, failed
	}
	if res.N == 0 {
		return benchFigure{}, fmt.Errorf("the benchmark did not run")
	}
	return benchFigure{ns: float64(res.T.Nanoseconds()) / float64(res.N), allocs: res.AllocsPerOp(), bytes: res.AllocedBytesPerOp()}, nil
}

// statusWriter is the cheapest http.ResponseWriter that still tells the status, so the in-process
// measure costs the handler, not a recorder.
type statusWriter struct {
	header http.Header
	code   int
}

func (w *statusWriter) Header() http.Header         { return w.header }
func (w *statusWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *statusWriter) WriteHeader(code int)        { w.code = code }

// serveInProcess posts body to the server's handler without the network: what one admission costs
// the server once TLS, HTTP framing and the client are taken away. The pod webhook answers 200
// to every review, so any other status is a failure.
func serveInProcess(h http.Handler, path string, body []byte) func() error {
	rd := bytes.NewReader(body)
	w := &statusWriter{header: http.Header{}}
	return func() error {
		rd.Reset(body)
		r, err := http.NewRequest(http.MethodPost, path, io.NopCloser(rd))
		if err != nil {
			return err
		}
		r.Header.Set("Content-Type", "application/json")
		w.code = http.StatusOK
		clear(w.header)
		h.ServeHTTP(w, r)
		if w.code != http.StatusOK {
			return fmt.Errorf("in-process handler answered %d", w.code)
		}
		return nil
	}
}
