// Package reviewserver is a fake API server's answers to TokenReviews and SubjectAccessReviews, as
// a cluster gives them, for the tests of what asks them (internal/kubeauth, agent/auth, the
// manager's metrics filter).
package reviewserver

import (
	"errors"
	"slices"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Server answers reviews: Tokens maps a token to its user, Audiences to the audiences it was issued
// for; Allow decides a SubjectAccessReview's spec (namespace: the LocalSubjectAccessReview's, "" for
// a cluster one). Set the fields before the first review.
type Server struct {
	Tokens    map[string]authenticationv1.UserInfo
	Audiences map[string][]string
	Allow     func(namespace string, spec authzv1.SubjectAccessReviewSpec) bool

	mu      sync.Mutex
	down    bool
	reviews []runtime.Object
}

// Client is a clientset whose reviews s answers.
func (s *Server) Client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if err := s.record(tr); err != nil {
			return true, nil, err
		}
		user, ok := s.Tokens[tr.Spec.Token]
		issued := s.Audiences[tr.Spec.Token]
		// As the API server: a token is accepted only for an audience it was issued for, and
		// without audiences asked for, for its own (all a token here is issued for).
		both := issued
		if len(tr.Spec.Audiences) > 0 {
			both = slices.DeleteFunc(slices.Clone(tr.Spec.Audiences), func(aud string) bool { return !slices.Contains(issued, aud) })
		}
		if ok && len(both) > 0 {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: user, Audiences: both}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "localsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.LocalSubjectAccessReview).DeepCopy()
		if err := s.record(sar); err != nil {
			return true, nil, err
		}
		sar.Status.Allowed = s.Allow(sar.Namespace, sar.Spec)
		return true, sar, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		if err := s.record(sar); err != nil {
			return true, nil, err
		}
		sar.Status.Allowed = s.Allow("", sar.Spec)
		return true, sar, nil
	})
	return c
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
