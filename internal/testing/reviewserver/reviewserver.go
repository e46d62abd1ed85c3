// Package reviewserver is a fake API server's answers to TokenReviews and SubjectAccessReviews, as
// a cluster gives them, through a fake clientset or over HTTP, for the tests of what asks them
// (internal/kubeauth, agent/auth, the manager's metrics filter).
package reviewserver

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
)

// APIAudience is the API server's own audience, of the tokens it issues without one asked for.
const APIAudience = "https://kubernetes.default.svc"

// Server answers reviews: Tokens maps a token to its user, Audiences to the audiences it was issued
// for; Allow decides a SubjectAccessReview's spec (namespace: the LocalSubjectAccessReview's, "" for
// a cluster one). IgnoreAudiences answers as an authenticator that does not check audiences: a
// known token is accepted for whatever is asked, and the answer names the audiences it was issued
// for. Set the fields before the first review, or between reviews of one goroutine.
type Server struct {
	Tokens          map[string]authenticationv1.UserInfo
	Audiences       map[string][]string
	Allow           func(namespace string, spec authzv1.SubjectAccessReviewSpec) bool
	IgnoreAudiences bool

	mu      sync.Mutex
	down    bool
	reviews []runtime.Object
}

// Client is a clientset whose reviews s answers.
func (s *Server) Client() *fake.Clientset {
	c := fake.NewClientset()
	for _, review := range []string{"tokenreviews", "localsubjectaccessreviews", "subjectaccessreviews"} {
		c.PrependReactor("create", review, func(a k8stesting.Action) (bool, runtime.Object, error) {
			return s.answer(a.(k8stesting.CreateAction).GetObject())
		})
	}
	return c
}

// Handler serves s's answers over HTTP at the API server's paths of the three reviews, for a real
// client-go client, with its transport and rate limiter, to ask.
func (s *Server) Handler() http.Handler {
	review := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// JSON or protobuf, whichever the client sent.
		asked, err := runtime.Decode(clientgoscheme.Codecs.UniversalDeserializer(), body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, answer, err := s.answer(asked)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /apis/authentication.k8s.io/v1/tokenreviews", review)
	mux.Handle("POST /apis/authorization.k8s.io/v1/namespaces/{ns}/localsubjectaccessreviews", review)
	mux.Handle("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", review)
	return mux
}

// answer records review and answers it, as a reactor does.
func (s *Server) answer(review runtime.Object) (bool, runtime.Object, error) {
	review = review.DeepCopyObject()
	if err := s.record(review); err != nil {
		return true, nil, err
	}
	switch r := review.(type) {
	case *authenticationv1.TokenReview:
		r.TypeMeta = metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}
		user, ok := s.Tokens[r.Spec.Token]
		issued := s.Audiences[r.Spec.Token]
		// As the API server: a token is accepted only for an audience asked for that it was
		// issued for, and without audiences asked for, for the API server's own.
		asked := r.Spec.Audiences
		if len(asked) == 0 {
			asked = []string{APIAudience}
		}
		both := slices.DeleteFunc(slices.Clone(asked), func(aud string) bool { return !slices.Contains(issued, aud) })
		if s.IgnoreAudiences {
			both = issued
		}
		if ok && len(both) > 0 {
			r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: user, Audiences: both}
		} else {
			r.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
	case *authzv1.LocalSubjectAccessReview:
		r.TypeMeta = metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "LocalSubjectAccessReview"}
		r.Status.Allowed = s.Allow(r.Namespace, r.Spec)
	case *authzv1.SubjectAccessReview:
		r.TypeMeta = metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}
		r.Status.Allowed = s.Allow("", r.Spec)
	}
	return true, review, nil
}

// record keeps a review asked; an error while the server is down.
func (s *Server) record(review runtime.Object) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reviews = append(s.reviews, review.DeepCopyObject())
	if s.down {
		return errors.New("connection refused")
	}
	return nil
}

// SetDown makes reviews fail (true) or be answered again.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Reviews are the reviews asked so far, answered or not, in order.
func (s *Server) Reviews() []runtime.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reviews)
}
