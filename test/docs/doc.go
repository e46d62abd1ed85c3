// Package docs holds tests over the project's prose (README.md and docs/*.md) as a whole, rather
// than over one reference table a package checks against its code (internal/testing/doctable).
package docs
