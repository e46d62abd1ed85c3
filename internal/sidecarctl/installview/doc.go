// Package installview is the installed pod webhook as sidecarctl accounts for it: which pods the
// API server never sends it (its namespace and object selectors, podwebhook.View), read from the
// sidecarops chart's values as `helm install -f` renders them (held to `helm template` by its
// tests), from a cluster's MutatingWebhookConfiguration, or as config/default installs it; the
// Namespaces' labels it is evaluated on (the input's, then the cluster's); the Pod Security level a
// namespace enforces; and the one notice that says where the view comes from.
//
// It decides nothing about injection (match conditions are carried, not evaluated) and must not
// read flags, the input's files or anything of a cluster but the webhook's registration and
// Namespaces.
package installview
