package defaults

import (
	corev1 "k8s.io/api/core/v1"
)

// Container applies the Kubernetes container defaults OpenKruise's SidecarSet webhook applies
// (docs/validation.md#defaulting says what is left out and why). c may be nil.
func Container(c *corev1.Container) {
	if c == nil {
		return
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicyFor(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil {
			objectFieldSelector(vf.FieldRef)
		}
	}
	resourceList(c.Resources.Limits)
	resourceList(c.Resources.Requests)
	Probe(c.LivenessProbe)
	Probe(c.ReadinessProbe)
	if c.Lifecycle != nil {
		lifecycleHandler(c.Lifecycle.PostStart)
		lifecycleHandler(c.Lifecycle.PreStop)
	}
}

// pullPolicyFor is SetDefaults_Container's rule: Always only for an explicit or implied ":latest".
func pullPolicyFor(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// resourceList is SetDefaults_ResourceList: quantities are rounded up to milli precision, which can
// change their serialisation (0.0001 becomes 1m) and thus the hash.
func resourceList(rl corev1.ResourceList) {
	for name, q := range rl {
		const milliScale = -3
		q.RoundUp(milliScale)
		rl[name] = q
	}
}

// Probe defaults a probe as the API server does. Container applies it to the liveness and readiness
// probes only, as OpenKruise's sidecar defaulting does (the hash depends on it); sidecarctl's pod
// validation applies it to a startupProbe too, as the API server would.
func Probe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	httpGetAction(p.HTTPGet)
}

func lifecycleHandler(h *corev1.LifecycleHandler) {
	if h != nil {
		httpGetAction(h.HTTPGet)
	}
}

func httpGetAction(a *corev1.HTTPGetAction) {
	if a == nil {
		return
	}
	if a.Path == "" {
		a.Path = "/"
	}
	if a.Scheme == "" {
		a.Scheme = corev1.URISchemeHTTP
	}
}

func objectFieldSelector(s *corev1.ObjectFieldSelector) {
	if s != nil && s.APIVersion == "" {
		s.APIVersion = "v1"
	}
}
