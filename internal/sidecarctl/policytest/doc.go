// Package policytest is `sidecarctl policy test`'s report: the Rego test results of the built-in
// policies and an administrator's directories (policies.Run), failures always and every result
// when verbose, the pass count, and line coverage against a threshold.
//
// The tests run in package policies; it must not load or evaluate policies itself.
package policytest
