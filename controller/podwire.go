package controller

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// The pod informer decodes pods from the API server's protobuf straight into compact records: of a
// pod it reads the metadata (without managedFields), the containers' names, images and restart
// policies, the node, and the status's phase, conditions and container statuses, and skips the
// rest unread. Decoding whole pods and trimming them afterwards took 4.7 µs and 6 KB per watch
// event of a typical pod, this 2.8 µs and 2 KB (BenchmarkPodRecord; docs/benchmarks.md,
// "Scale-up"). TestPodWire holds the two ways to the same record.

// Field numbers of k8s.io/api/core/v1/generated.proto and of ObjectMeta's.
const (
	podMetadata, podSpec, podStatus                                  = 1, 2, 3
	specContainers, specInitContainers, specNodeName                 = 2, 20, 10
	containerName, containerImage, containerRestartPolicy            = 1, 2, 24
	statusPhase, statusConditions, statusContainers, statusInitConts = 1, 2, 8, 10
	metaManagedFields                                                = 17
	listMetadata, listItems                                          = 1, 2
)

// eachField calls f with the value of each field of the protobuf message b whose number is one of
// wanted, in order; every field the record reads is length-delimited (a string or a message), so
// another wire type there is an error. Other fields are skipped unread.
func eachField(b []byte, wanted []protowire.Number, f func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		if slices.Contains(wanted, num) {
			if typ != protowire.BytesType {
				return fmt.Errorf("pod protobuf: field %d has wire type %d, not a string or message", num, typ)
			}
			v, _ := protowire.ConsumeBytes(b[:m])
			if err := f(num, v); err != nil {
				return err
			}
		}
		b = b[m:]
	}
	return nil
}

// appendDecoded decodes v as one more element of list.
func appendDecoded[T any, P interface {
	*T
	Unmarshal([]byte) error
}](list []T, v []byte) ([]T, error) {
	list = append(list, *new(T))
	return list, P(&list[len(list)-1]).Unmarshal(v)
}

// Reset empties the record; with Unmarshal it makes the record a protobuf message the API
// machinery's protobuf serializer decodes into.
func (c *compactPod) Reset() { *c = compactPod{} }

// Unmarshal decodes a v1 Pod's protobuf encoding into the record.
func (c *compactPod) Unmarshal(b []byte) error {
	// A record's lists of containers are never nil, as a pod's decoded whole and trimmed are not.
	c.containers, c.initContainers = []containerRef{}, []containerRef{}
	return eachField(b, []protowire.Number{podMetadata, podSpec, podStatus}, func(num protowire.Number, v []byte) error {
		switch num {
		case podMetadata:
			return c.unmarshalMeta(v)
		case podSpec:
			return c.unmarshalSpec(v)
		default:
			return c.unmarshalStatus(v)
		}
	})
}

// unmarshalMeta decodes the metadata without its managedFields, which nothing of the manager reads
// and the cache drops (cache.TransformStripManagedFields). The fields around them are decoded in
// place, run by run: decoding a protobuf message in parts merges them, as decoding it whole would.
func (c *compactPod) unmarshalMeta(b []byte) error {
	run := 0 // where the run of fields being kept starts
	for at := 0; at < len(b); {
		num, typ, n := protowire.ConsumeTag(b[at:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[at+n:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		if num == metaManagedFields {
			if err := c.unmarshalMetaRun(b[run:at]); err != nil {
				return err
			}
			run = at + n + m
		}
		at += n + m
	}
	return c.unmarshalMetaRun(b[run:])
}

func (c *compactPod) unmarshalMetaRun(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return c.ObjectMeta.Unmarshal(b)
}

func (c *compactPod) unmarshalSpec(b []byte) error {
	return eachField(b, []protowire.Number{specContainers, specInitContainers, specNodeName}, func(num protowire.Number, v []byte) error {
		if num == specNodeName {
			c.nodeName = string(v)
			return nil
		}
		var ref containerRef
		if err := ref.unmarshal(v); err != nil {
			return err
		}
		if num == specContainers {
			c.containers = append(c.containers, ref)
		} else {
			c.initContainers = append(c.initContainers, ref)
		}
		return nil
	})
}

func (r *containerRef) unmarshal(b []byte) error {
	return eachField(b, []protowire.Number{containerName, containerImage, containerRestartPolicy}, func(num protowire.Number, v []byte) error {
		switch num {
		case containerName:
			r.name = string(v)
		case containerImage:
			r.image = string(v)
		default:
			p := corev1.ContainerRestartPolicy(v)
			r.restartPolicy = &p
		}
		return nil
	})
}

func (c *compactPod) unmarshalStatus(b []byte) error {
	return eachField(b, []protowire.Number{statusPhase, statusConditions, statusContainers, statusInitConts}, func(num protowire.Number, v []byte) error {
		var err error
		switch num {
		case statusPhase:
			c.phase = corev1.PodPhase(v)
		case statusConditions:
			c.conditions, err = appendDecoded(c.conditions, v)
		case statusContainers:
			c.statuses, err = appendDecoded(c.statuses, v)
		default:
			c.initStatuses, err = appendDecoded(c.initStatuses, v)
		}
		return err
	})
}

// compactPodList is a v1 PodList decoded into records, as the pod informer lists pods.
type compactPodList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []compactPod
}

// Reset empties the list (protobuf message, as compactPod's).
func (l *compactPodList) Reset() { *l = compactPodList{} }

// Unmarshal decodes a v1 PodList's protobuf encoding.
func (l *compactPodList) Unmarshal(b []byte) error {
	return eachField(b, []protowire.Number{listMetadata, listItems}, func(num protowire.Number, v []byte) error {
		var err error
		if num == listMetadata {
			err = l.ListMeta.Unmarshal(v)
		} else {
			l.Items, err = appendDecoded(l.Items, v)
		}
		return err
	})
}

// DeepCopyObject copies the list, each item as compactPod.DeepCopyObject does.
func (l *compactPodList) DeepCopyObject() runtime.Object {
	out := &compactPodList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]compactPod, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*compactPod)
		}
	}
	return out
}

// podWire decodes v1 Pods and PodLists into records, and the rest of what a pod watch carries
// (watch events, Status errors) as client-go does.
var podWire = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Pod"), &compactPod{})
	s.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("PodList"), &compactPodList{})
	metav1.AddToGroupVersion(s, corev1.SchemeGroupVersion)
	return serializer.NewCodecFactory(s)
}()

// podListWatch lists and watches every pod of the cluster over protobuf, decoding records, on
// connections of its own (podConnections).
func podListWatch(cfg *rest.Config) (toolscache.ListerWatcher, error) {
	cfg = podConnections(cfg)
	cfg.APIPath, cfg.GroupVersion = "/api", &corev1.SchemeGroupVersion
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf
	cfg.NegotiatedSerializer = inPlace(podWire.WithoutConversion())
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &compactPodList{}
			err := rc.Get().Resource("pods").VersionedParams(&o, clientgoscheme.ParameterCodec).Do(ctx).Into(list)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return rc.Get().Resource("pods").VersionedParams(&o, clientgoscheme.ParameterCodec).Watch(ctx)
		},
	}, nil
}

// inPlace is ns with its protobuf decoders reading watch events and pods where they are, in the
// frame the watch has read: client-go's copy each event's object twice (into the event's
// RawExtension, then into the runtime.Unknown around the object) before the record is decoded
// from it, a few kilobytes per event for the collector. Nothing decoded keeps a slice of the frame
// (the record copies what it keeps), so the frame can be read over by the next event. Everything
// else — lists, Status errors, other encodings — is decoded by ns's own decoders.
func inPlace(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	infos := slices.Clone(ns.SupportedMediaTypes())
	for i := range infos {
		if infos[i].MediaType != runtime.ContentTypeProtobuf || infos[i].StreamSerializer == nil {
			continue
		}
		infos[i].Serializer = inPlacePods{infos[i].Serializer}
		stream := *infos[i].StreamSerializer
		stream.Serializer = inPlaceEvents{stream.Serializer}
		infos[i].StreamSerializer = &stream
	}
	return inPlaceSerializer{NegotiatedSerializer: ns, infos: infos}
}

type inPlaceSerializer struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func (s inPlaceSerializer) SupportedMediaTypes() []runtime.SerializerInfo { return s.infos }

var (
	podKind        = corev1.SchemeGroupVersion.WithKind("Pod")
	watchEventKind = corev1.SchemeGroupVersion.WithKind("WatchEvent")
	// protobufPrefix starts every object the API server encodes in protobuf.
	protobufPrefix = []byte("k8s\x00")
)

// Field numbers of runtime.Unknown, TypeMeta, metav1.WatchEvent and runtime.RawExtension.
const (
	unknownTypeMeta, unknownRaw, unknownContentEncoding = 1, 2, 3
	typeMetaAPIVersion, typeMetaKind                    = 1, 2
	watchEventType, watchEventObject                    = 1, 2
	rawExtensionRaw                                     = 1
)

// inPlacePods decodes a v1 Pod into a record from where its encoding is.
type inPlacePods struct{ runtime.Serializer }

func (d inPlacePods) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	rec, toRecord := into.(*compactPod)
	raw, isPod := podEncoding(data)
	if !isPod || (into != nil && !toRecord) {
		return d.Serializer.Decode(data, defaults, into)
	}
	if rec == nil {
		rec = &compactPod{}
	}
	rec.Reset()
	gvk := podKind
	if err := rec.Unmarshal(raw); err != nil {
		return nil, &gvk, err
	}
	return rec, &gvk, nil
}

// podEncoding is the v1 Pod message inside data, an object encoded in protobuf, if it is one.
func podEncoding(data []byte) (raw []byte, ok bool) {
	body, found := bytes.CutPrefix(data, protobufPrefix)
	if !found {
		return nil, false
	}
	var apiVersion, kind, encoding []byte
	err := eachField(body, []protowire.Number{unknownTypeMeta, unknownRaw, unknownContentEncoding}, func(num protowire.Number, v []byte) error {
		switch num {
		case unknownTypeMeta:
			return eachField(v, []protowire.Number{typeMetaAPIVersion, typeMetaKind}, func(num protowire.Number, v []byte) error {
				if num == typeMetaAPIVersion {
					apiVersion = v
				} else {
					kind = v
				}
				return nil
			})
		case unknownRaw:
			raw = v
		default:
			encoding = v
		}
		return nil
	})
	ok = err == nil && len(encoding) == 0 && string(apiVersion) == podKind.Version && string(kind) == podKind.Kind
	return raw, ok
}

// inPlaceEvents decodes a watch event's frame, leaving the event's object where it is.
type inPlaceEvents struct{ runtime.Serializer }

func (d inPlaceEvents) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	*ev = metav1.WatchEvent{}
	gvk := watchEventKind
	err := eachField(data, []protowire.Number{watchEventType, watchEventObject}, func(num protowire.Number, v []byte) error {
		if num == watchEventType {
			ev.Type = string(v)
			return nil
		}
		return eachField(v, []protowire.Number{rawExtensionRaw}, func(_ protowire.Number, v []byte) error {
			ev.Object.Raw = v
			return nil
		})
	})
	if err != nil {
		return nil, &gvk, err
	}
	return ev, &gvk, nil
}
