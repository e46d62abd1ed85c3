// Package podwebhook says which pods the API server sends sidecarops' pod webhook: the webhook's
// namespace and object selectors, as config/webhook and the chart register them or as read from a
// cluster, evaluated as the API server evaluates them. sidecarctl's explain, inject and check and
// its migrate check share it.
//
// It reads nothing itself and decides nothing about injection: match conditions are carried, not
// evaluated.
package podwebhook
