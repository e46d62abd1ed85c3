// Package release tests what a team installs from a release: the repository's GitHub Action
// (action.yml), whose steps run here against a local copy of a release's downloads.
package release
