// Package kubeauth asks the API server about the callers of our own HTTP endpoints: who a bearer
// token belongs to (a TokenReview, optionally for given audiences) and whether that user may have
// the access a request asks for (a SubjectAccessReview: a LocalSubjectAccessReview for a resource
// in a namespace, a cluster one for a non-resource path such as /metrics). Answers are kept briefly
// in caches of bounded size, allowed answers apart from refusals, and an allowed answer asked for
// near its expiry is asked again in the background; one review answers all the requests waiting
// for it; the reviews asked are bounded per source (an IPv4 address, an IPv6 /64) and in all, with
// a reserve that sources refused lately may not spend and an allowance of their own for the
// re-reviews of callers the API server allowed (Limits), refused at once past that; and the failures
// a caller can provoke are logged sampled (Sampler). So neither a busy caller nor a flood of made-up
// tokens costs the API server more than the limits allow, the process more than a fixed amount of
// memory, a caller whose answer is kept its access, nor a flood's addresses other callers theirs.
//
// It serves the sidecar agent's API (agent/auth) and the manager's metrics (package manager),
// reading their requests' credentials (FromRequest) and sizing their review clients
// (ClientConfig). It must not serve HTTP itself nor write anything to the API server: reviews are
// questions, and the only API calls it makes.
package kubeauth
