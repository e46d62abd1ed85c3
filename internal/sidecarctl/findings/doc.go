// Package findings is what `sidecarctl check` reports and how: the finding (a placed problem with
// its severity and rule), the rules by name and what --enable, --disable and the disable
// annotation may do with each, the order findings are printed in, and the output formats (text,
// -o json's sidecarctl.check/v1 document, -o github's workflow annotations) with their summary.
//
// It finds nothing itself: the workspace (reading) and check (judging) make findings. It must not
// read files or flags, nor decide what a cluster refuses.
package findings
