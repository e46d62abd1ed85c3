package v1beta1

// Hub marks v1beta1 as the version every other converts to and from (controller-runtime's
// conversion.Hub), as in OpenKruise.
func (*SidecarSet) Hub() {}
