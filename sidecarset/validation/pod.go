package validation

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// This file is the subset of Kubernetes' pod validation (pkg/apis/core/validation) that OpenKruise
// applies to a SidecarSet by validating a fake pod made of its initContainers, containers and
// volumes (compat §2 step 10). k8s.io/kubernetes is not a dependency, so the rules that matter for
// sidecars are transcribed here, with Kubernetes' messages; paths are the SidecarSet's, which are
// the fake pod's (spec.containers[i], spec.initContainers[i], spec.volumes[i]).

// validatePodLevel validates volumes, then containers, then initContainers (Kubernetes' order).
func validatePodLevel(spec *v1beta1.SidecarSetSpec, fldPath *field.Path) field.ErrorList {
	vols, allErrs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	names := map[string]bool{}
	for i := range spec.Containers {
		allErrs = append(allErrs, validateContainer(&spec.Containers[i].Container, containerRegular, vols, names, fldPath.Child("containers").Index(i))...)
	}
	for i := range spec.InitContainers {
		kind := containerInit
		if isNativeSidecar(&spec.InitContainers[i]) {
			kind = containerNativeSidecar
		}
		allErrs = append(allErrs, validateContainer(&spec.InitContainers[i].Container, kind, vols, names, fldPath.Child("initContainers").Index(i))...)
	}
	return allErrs
}

type containerKind int

const (
	containerRegular containerKind = iota
	containerInit
	containerNativeSidecar
)

// setFields returns the JSON names of the non-nil pointer fields of the struct *v points to. The
// Kubernetes "one-of" structs (VolumeSource, EnvVarSource, handlers, projections) are all pointers,
// and reflection keeps new members counted without code changes.
func setFields(v interface{}) []string {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return nil
	}
	rv = rv.Elem()
	var names []string
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
			names = append(names, name)
		}
	}
	return names
}

// oneOf reports "none" and "more than one" for a Kubernetes union at fldPath and returns the member
// that is set (the first one when several are), or "".
func oneOf(v interface{}, fldPath *field.Path, kind, noneMsg string) (string, field.ErrorList) {
	set := setFields(v)
	if len(set) == 0 {
		return "", field.ErrorList{field.Required(fldPath, noneMsg)}
	}
	var allErrs field.ErrorList
	for _, extra := range set[1:] {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child(extra), fmt.Sprintf("may not specify more than 1 %s", kind)))
	}
	return set[0], allErrs
}

// validateVolumes returns the volumes that are valid, by name: as in Kubernetes, a mount of an
// invalid volume is also reported as not found.
func validateVolumes(volumes []corev1.Volume, fldPath *field.Path) (map[string]*corev1.VolumeSource, field.ErrorList) {
	vols := make(map[string]*corev1.VolumeSource, len(volumes))
	seen := map[string]bool{}
	var allErrs field.ErrorList
	for i := range volumes {
		v := &volumes[i]
		p := fldPath.Index(i)
		errs := validateVolumeSource(&v.VolumeSource, p)
		namePath := p.Child("name")
		if v.Name == "" {
			errs = append(errs, field.Required(namePath, ""))
		} else {
			for _, msg := range content.IsDNS1123Label(v.Name) {
				errs = append(errs, field.Invalid(namePath, v.Name, msg))
			}
		}
		if seen[v.Name] {
			errs = append(errs, field.Duplicate(namePath, v.Name))
		}
		seen[v.Name] = true
		if len(errs) == 0 {
			vols[v.Name] = &v.VolumeSource
		}
		allErrs = append(allErrs, errs...)
	}
	return vols, allErrs
}

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

var hostPathTypes = []corev1.HostPathType{
	corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory, corev1.HostPathFileOrCreate,
	corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev,
}

func validateVolumeSource(src *corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	kind, allErrs := oneOf(src, fldPath, "volume type", "must specify a volume type")
	p := fldPath.Child(kind)
	switch kind {
	case "hostPath":
		if src.HostPath.Path == "" {
			allErrs = append(allErrs, field.Required(p.Child("path"), ""))
		} else {
			allErrs = append(allErrs, validatePathNoBacksteps(src.HostPath.Path, p.Child("path"))...)
		}
		if t := src.HostPath.Type; t != nil && !containsValue(hostPathTypes, *t) {
			allErrs = append(allErrs, field.NotSupported(p.Child("type"), *t, hostPathTypes))
		}
	case "emptyDir":
		if l := src.EmptyDir.SizeLimit; l != nil && l.Sign() < 0 {
			allErrs = append(allErrs, field.Forbidden(p.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
	case "secret":
		if src.Secret.SecretName == "" {
			allErrs = append(allErrs, field.Required(p.Child("secretName"), ""))
		}
		allErrs = append(allErrs, validateFileMode(src.Secret.DefaultMode, p.Child("defaultMode"))...)
		allErrs = append(allErrs, validateKeyToPaths(src.Secret.Items, p.Child("items"))...)
	case "configMap":
		if src.ConfigMap.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		allErrs = append(allErrs, validateFileMode(src.ConfigMap.DefaultMode, p.Child("defaultMode"))...)
		allErrs = append(allErrs, validateKeyToPaths(src.ConfigMap.Items, p.Child("items"))...)
	case "persistentVolumeClaim":
		if src.PersistentVolumeClaim.ClaimName == "" {
			allErrs = append(allErrs, field.Required(p.Child("claimName"), ""))
		}
	case "downwardAPI":
		allErrs = append(allErrs, validateFileMode(src.DownwardAPI.DefaultMode, p.Child("defaultMode"))...)
		allErrs = append(allErrs, validateDownwardAPIFiles(src.DownwardAPI.Items, p.Child("items"))...)
	case "projected":
		allErrs = append(allErrs, validateProjected(src.Projected, p)...)
	}
	return allErrs
}

func validateFileMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0o777 || *mode < 0) {
		return field.ErrorList{field.Invalid(fldPath, *mode, fileModeErrorMsg)}
	}
	return nil
}

func validateKeyToPaths(items []corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i := range items {
		p := fldPath.Index(i)
		if items[i].Key == "" {
			allErrs = append(allErrs, field.Required(p.Child("key"), ""))
		}
		allErrs = append(allErrs, validateItemPath(items[i].Path, p.Child("path"))...)
		allErrs = append(allErrs, validateFileMode(items[i].Mode, p.Child("mode"))...)
	}
	return allErrs
}

func validateDownwardAPIFiles(items []corev1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i := range items {
		p := fldPath.Index(i)
		allErrs = append(allErrs, validateItemPath(items[i].Path, p.Child("path"))...)
		allErrs = append(allErrs, validateFileMode(items[i].Mode, p.Child("mode"))...)
		switch {
		case items[i].FieldRef != nil && items[i].ResourceFieldRef != nil:
			allErrs = append(allErrs, field.Invalid(p, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		case items[i].FieldRef == nil && items[i].ResourceFieldRef == nil:
			allErrs = append(allErrs, field.Required(p, "one of fieldRef and resourceFieldRef is required"))
		case items[i].FieldRef != nil:
			allErrs = append(allErrs, validateFieldRefRequired(items[i].FieldRef, p.Child("fieldRef"))...)
		}
	}
	return allErrs
}

func validateItemPath(path string, fldPath *field.Path) field.ErrorList {
	if path == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return validateLocalDescendingPath(path, fldPath)
}

const (
	minTokenExpirationSeconds = 10 * 60
	maxTokenExpirationSeconds = 1 << 32
)

func validateProjected(src *corev1.ProjectedVolumeSource, fldPath *field.Path) field.ErrorList {
	allErrs := validateFileMode(src.DefaultMode, fldPath.Child("defaultMode"))
	for i := range src.Sources {
		s := &src.Sources[i]
		p := fldPath.Child("sources").Index(i)
		kind, errs := oneOf(s, p, "projection type", "must specify a projection type")
		allErrs = append(allErrs, errs...)
		switch kind {
		case "secret":
			allErrs = append(allErrs, validateKeyToPaths(s.Secret.Items, p.Child("secret", "items"))...)
		case "configMap":
			allErrs = append(allErrs, validateKeyToPaths(s.ConfigMap.Items, p.Child("configMap", "items"))...)
		case "downwardAPI":
			allErrs = append(allErrs, validateDownwardAPIFiles(s.DownwardAPI.Items, p.Child("downwardAPI", "items"))...)
		case "serviceAccountToken":
			t := s.ServiceAccountToken
			tp := p.Child("serviceAccountToken")
			if t.ExpirationSeconds != nil {
				if *t.ExpirationSeconds < minTokenExpirationSeconds {
					allErrs = append(allErrs, field.Invalid(tp.Child("expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
				} else if *t.ExpirationSeconds > maxTokenExpirationSeconds {
					allErrs = append(allErrs, field.Invalid(tp.Child("expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds"))
				}
			}
			allErrs = append(allErrs, validateItemPath(t.Path, tp.Child("path"))...)
		}
	}
	return allErrs
}

// validatePathNoBacksteps rejects ".." components.
func validatePathNoBacksteps(p string, fldPath *field.Path) field.ErrorList {
	for _, item := range strings.Split(strings.ReplaceAll(p, `\`, "/"), "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(fldPath, p, "must not contain '..'")}
		}
	}
	return nil
}

// validateLocalDescendingPath: relative and without "..".
func validateLocalDescendingPath(p string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if strings.HasPrefix(p, "/") {
		allErrs = append(allErrs, field.Invalid(fldPath, p, "must be a relative path"))
	}
	return append(allErrs, validatePathNoBacksteps(p, fldPath)...)
}

var (
	pullPolicies              = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	terminationMessagePolices = []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
	portProtocols             = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}
	uriSchemes                = []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}
)

func containsValue[T comparable](values []T, v T) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

// validateContainer checks one container; names collects container names across the fake pod so
// that names are unique across initContainers and containers.
func validateContainer(c *corev1.Container, kind containerKind, vols map[string]*corev1.VolumeSource, names map[string]bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	namePath := fldPath.Child("name")
	if c.Name == "" {
		allErrs = append(allErrs, field.Required(namePath, ""))
	} else {
		for _, msg := range content.IsDNS1123Label(c.Name) {
			allErrs = append(allErrs, field.Invalid(namePath, c.Name, msg))
		}
	}
	if names[c.Name] {
		allErrs = append(allErrs, field.Duplicate(namePath, c.Name))
	}
	names[c.Name] = true

	if c.Image == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	allErrs = append(allErrs, validateEnum(c.ImagePullPolicy, pullPolicies, fldPath.Child("imagePullPolicy"))...)
	allErrs = append(allErrs, validateEnum(c.TerminationMessagePolicy, terminationMessagePolices, fldPath.Child("terminationMessagePolicy"))...)

	if rp := c.RestartPolicy; rp != nil {
		rpPath := fldPath.Child("restartPolicy")
		if kind == containerRegular {
			allErrs = append(allErrs, field.Forbidden(rpPath, "may not be set for non-init containers"))
		} else if *rp != corev1.ContainerRestartPolicyAlways {
			allErrs = append(allErrs, field.NotSupported(rpPath, *rp, []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
		}
	}

	allErrs = append(allErrs, validatePorts(c.Ports, fldPath.Child("ports"))...)
	allErrs = append(allErrs, validateEnv(c.Env, fldPath.Child("env"))...)
	allErrs = append(allErrs, validateVolumeMounts(c.VolumeMounts, c.VolumeDevices, vols, fldPath.Child("volumeMounts"))...)
	allErrs = append(allErrs, validateVolumeDevices(c.VolumeDevices, c.VolumeMounts, vols, fldPath.Child("volumeDevices"))...)
	allErrs = append(allErrs, validateResources(&c.Resources, fldPath.Child("resources"))...)

	if kind == containerInit {
		// A plain init container runs to completion: nothing to probe and no lifecycle.
		const msg = "may not be set for init containers without restartPolicy=Always"
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil},
		} {
			if f.set {
				allErrs = append(allErrs, field.Forbidden(fldPath.Child(f.name), msg))
			}
		}
		return allErrs
	}
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			allErrs = append(allErrs, validateHandler(l.PostStart, fldPath.Child("lifecycle", "postStart"))...)
		}
		if l.PreStop != nil {
			allErrs = append(allErrs, validateHandler(l.PreStop, fldPath.Child("lifecycle", "preStop"))...)
		}
	}
	allErrs = append(allErrs, validateProbe(c.LivenessProbe, true, fldPath.Child("livenessProbe"))...)
	allErrs = append(allErrs, validateProbe(c.ReadinessProbe, false, fldPath.Child("readinessProbe"))...)
	allErrs = append(allErrs, validateProbe(c.StartupProbe, true, fldPath.Child("startupProbe"))...)
	return allErrs
}

func validateEnum[T ~string](v T, allowed []T, fldPath *field.Path) field.ErrorList {
	switch {
	case v == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case !containsValue(allowed, v):
		return field.ErrorList{field.NotSupported(fldPath, v, allowed)}
	}
	return nil
}

func validatePorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := map[string]bool{}
	for i := range ports {
		port := &ports[i]
		p := fldPath.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					allErrs = append(allErrs, field.Invalid(p.Child("name"), port.Name, msg))
				}
			} else if names[port.Name] {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), port.Name))
			} else {
				names[port.Name] = true
			}
		}
		if port.ContainerPort == 0 {
			allErrs = append(allErrs, field.Required(p.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		allErrs = append(allErrs, validateEnum(port.Protocol, portProtocols, p.Child("protocol"))...)
	}
	return allErrs
}

// validateEnv uses Kubernetes' strict environment variable names (a C identifier with '.' and '-'
// allowed), which is what OpenKruise's pod validation options select.
func validateEnv(env []corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i := range env {
		ev := &env[i]
		p := fldPath.Index(i)
		if ev.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsEnvVarName(ev.Name) {
				allErrs = append(allErrs, field.Invalid(p.Child("name"), ev.Name, msg))
			}
		}
		if ev.ValueFrom == nil {
			continue
		}
		vp := p.Child("valueFrom")
		set := setFields(ev.ValueFrom)
		switch {
		case len(set) == 0:
			allErrs = append(allErrs, field.Invalid(vp, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
		case ev.Value != "":
			allErrs = append(allErrs, field.Invalid(vp, "", "may not be specified when `value` is not empty"))
		case len(set) > 1:
			allErrs = append(allErrs, field.Invalid(vp, "", "may not have more than one field specified at a time"))
		}
		if ref := ev.ValueFrom.FieldRef; ref != nil {
			allErrs = append(allErrs, validateFieldRefRequired(ref, vp.Child("fieldRef"))...)
		}
		if ref := ev.ValueFrom.ConfigMapKeyRef; ref != nil {
			allErrs = append(allErrs, validateKeyRef(ref.Name, ref.Key, vp.Child("configMapKeyRef"))...)
		}
		if ref := ev.ValueFrom.SecretKeyRef; ref != nil {
			allErrs = append(allErrs, validateKeyRef(ref.Name, ref.Key, vp.Child("secretKeyRef"))...)
		}
	}
	return allErrs
}

func validateFieldRefRequired(ref *corev1.ObjectFieldSelector, fldPath *field.Path) field.ErrorList {
	if ref.APIVersion == "" {
		return field.ErrorList{field.Required(fldPath.Child("apiVersion"), "")}
	}
	if ref.FieldPath == "" {
		return field.ErrorList{field.Required(fldPath.Child("fieldPath"), "")}
	}
	return nil
}

func validateKeyRef(name, key string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	}
	if key == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("key"), key, msg))
		}
	}
	return allErrs
}

// validateVolumeMounts: every mount names a volume of spec.volumes (the only volumes injected with
// the sidecar), has a unique path, and does not collide with a device of the same container.
func validateVolumeMounts(mounts []corev1.VolumeMount, devices []corev1.VolumeDevice, vols map[string]*corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	paths := map[string]bool{}
	deviceNames, devicePaths := namesAndPaths(devices, func(d corev1.VolumeDevice) (string, string) { return d.Name, d.DevicePath })
	for i := range mounts {
		m := &mounts[i]
		p := fldPath.Index(i)
		if m.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			allErrs = append(allErrs, field.Required(p.Child("mountPath"), ""))
		}
		if paths[m.MountPath] {
			allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths[m.MountPath] = true
		if deviceNames[m.Name] {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), m.Name, "must not already exist in volumeDevices"))
		}
		if devicePaths[m.MountPath] {
			allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must not already exist as a path in volumeDevices"))
		}
		if m.SubPath != "" {
			allErrs = append(allErrs, validateLocalDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			allErrs = append(allErrs, validateLocalDescendingPath(m.SubPathExpr, p.Child("subPathExpr"))...)
		}
	}
	return allErrs
}

// validateVolumeDevices: block devices can only come from PVC or ephemeral volumes.
func validateVolumeDevices(devices []corev1.VolumeDevice, mounts []corev1.VolumeMount, vols map[string]*corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names, paths := map[string]bool{}, map[string]bool{}
	mountNames, mountPaths := namesAndPaths(mounts, func(m corev1.VolumeMount) (string, string) { return m.Name, m.MountPath })
	for i := range devices {
		d := &devices[i]
		p := fldPath.Index(i)
		src, found := vols[d.Name]
		if d.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		if names[d.Name] {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "must be unique"))
		}
		switch {
		case !found:
			allErrs = append(allErrs, field.NotFound(p.Child("name"), d.Name))
		case src.PersistentVolumeClaim == nil && src.Ephemeral == nil:
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if d.DevicePath == "" {
			allErrs = append(allErrs, field.Required(p.Child("devicePath"), ""))
		}
		if paths[d.DevicePath] {
			allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if d.DevicePath != "" && len(validatePathNoBacksteps(d.DevicePath, p)) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		} else {
			paths[d.DevicePath] = true
		}
		if mountNames[d.Name] {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "must not already exist in volumeMounts"))
		}
		if mountPaths[d.DevicePath] {
			allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "must not already exist as a path in volumeMounts"))
		}
		if d.Name != "" {
			names[d.Name] = true
		}
	}
	return allErrs
}

// namesAndPaths indexes a container's mounts or devices by volume name and path, for the checks
// that a mount and a device never share either.
func namesAndPaths[T any](items []T, key func(T) (name, path string)) (names, paths map[string]bool) {
	names, paths = make(map[string]bool, len(items)), make(map[string]bool, len(items))
	for _, it := range items {
		n, p := key(it)
		names[n], paths[p] = true, true
	}
	return names, paths
}

var standardContainerResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// validateResources: known resource names, non-negative quantities, requests within limits, and
// extended resources as whole numbers with requests equal to limits (they cannot be overcommitted).
func validateResources(r *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	for _, name := range slices.Sorted(maps.Keys(r.Limits)) {
		q := r.Limits[name]
		allErrs = append(allErrs, validateResourceQuantity(name, q, limPath.Key(string(name)))...)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		q := r.Requests[name]
		p := reqPath.Key(string(name))
		allErrs = append(allErrs, validateResourceQuantity(name, q, p)...)
		limit, hasLimit := r.Limits[name]
		switch {
		case hasLimit && !overcommitAllowed(name) && q.Cmp(limit) != 0:
			allErrs = append(allErrs, field.Invalid(p, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case hasLimit && q.Cmp(limit) > 0:
			allErrs = append(allErrs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		case !hasLimit && !overcommitAllowed(name):
			allErrs = append(allErrs, field.Required(limPath.Key(string(name)), "Limit must be set for non overcommitable resources"))
		}
	}
	return allErrs
}

func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), "kubernetes.io/")
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func overcommitAllowed(name corev1.ResourceName) bool {
	return isNativeResource(name) && !isHugePages(name)
}

func validateResourceQuantity(name corev1.ResourceName, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range content.IsLabelKey(string(name)) {
		allErrs = append(allErrs, field.Invalid(fldPath, name, msg))
	}
	switch {
	case !strings.Contains(string(name), "/"):
		if !containsValue(standardContainerResources, name) && !isHugePages(name) {
			allErrs = append(allErrs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
	case !isNativeResource(name):
		if strings.HasPrefix(string(name), "requests.") || len(content.IsLabelKey("requests."+string(name))) != 0 {
			allErrs = append(allErrs, field.Invalid(fldPath, name, "doesn't follow extended resource name standard"))
		}
	}
	if q.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, q.String(), "must be greater than or equal to 0"))
	}
	if !isNativeResource(name) && q.MilliValue()%1000 != 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, q.String(), "must be an integer"))
	}
	return allErrs
}

// validateHandler checks a lifecycle hook or a probe's handler: exactly one action, well formed.
func validateHandler(h interface{}, fldPath *field.Path) field.ErrorList {
	kind, allErrs := oneOf(h, fldPath, "handler type", "must specify a handler type")
	var exec *corev1.ExecAction
	var httpGet *corev1.HTTPGetAction
	var tcp *corev1.TCPSocketAction
	var grpc *corev1.GRPCAction
	var sleep *corev1.SleepAction
	switch v := h.(type) {
	case *corev1.ProbeHandler:
		exec, httpGet, tcp, grpc = v.Exec, v.HTTPGet, v.TCPSocket, v.GRPC
	case *corev1.LifecycleHandler:
		exec, httpGet, tcp, sleep = v.Exec, v.HTTPGet, v.TCPSocket, v.Sleep
	}
	p := fldPath.Child(kind)
	switch kind {
	case "exec":
		if len(exec.Command) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("command"), ""))
		}
	case "httpGet":
		if httpGet.Path == "" {
			allErrs = append(allErrs, field.Required(p.Child("path"), ""))
		}
		allErrs = append(allErrs, validatePortNumOrName(httpGet.Port, p.Child("port"))...)
		if !containsValue(uriSchemes, httpGet.Scheme) {
			allErrs = append(allErrs, field.NotSupported(p.Child("scheme"), httpGet.Scheme, uriSchemes))
		}
		for _, h := range httpGet.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(h.Name) {
				allErrs = append(allErrs, field.Invalid(p.Child("httpHeaders"), h.Name, msg))
			}
		}
	case "tcpSocket":
		allErrs = append(allErrs, validatePortNumOrName(tcp.Port, p.Child("port"))...)
	case "grpc":
		for _, msg := range validation.IsValidPortNum(int(grpc.Port)) {
			allErrs = append(allErrs, field.Invalid(p.Child("port"), grpc.Port, msg))
		}
	case "sleep":
		if sleep.Seconds < 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("seconds"), sleep.Seconds, "must be non-negative integer"))
		}
	}
	return allErrs
}

func validatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.StrVal, msg))
		}
	default:
		allErrs = append(allErrs, field.InternalError(fldPath, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return allErrs
}

// validateProbe: numbers non-negative, one handler; liveness and startup probes must have
// successThreshold 1 (a liveness/startup probe that needs several successes makes no sense).
func validateProbe(probe *corev1.Probe, successMustBeOne bool, fldPath *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	allErrs := validateHandler(&probe.ProbeHandler, fldPath)
	for _, n := range []struct {
		name  string
		value int32
	}{
		{"initialDelaySeconds", probe.InitialDelaySeconds}, {"timeoutSeconds", probe.TimeoutSeconds},
		{"periodSeconds", probe.PeriodSeconds}, {"successThreshold", probe.SuccessThreshold},
		{"failureThreshold", probe.FailureThreshold},
	} {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(n.value), fldPath.Child(n.name))...)
	}
	if g := probe.TerminationGracePeriodSeconds; g != nil {
		if !successMustBeOne {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes"))
		} else if *g <= 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}
	if successMustBeOne && probe.SuccessThreshold != 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("successThreshold"), probe.SuccessThreshold, "must be 1"))
	}
	return allErrs
}
