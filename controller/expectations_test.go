package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func cachedPod(name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func TestExpectations(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	e := newExpectations()
	assert.Empty(t, e.observe("ss", nil), "nothing expected")

	e.expect("ss", a, "10")
	e.expect("ss", a, "12") // the condition patch after the update
	e.expect("ss", a, "11") // an older write reported late does not lower the bar
	e.expect("ss", b, "20")
	e.expect("other", a, "12")

	assert.ElementsMatch(t, []types.NamespacedName{a, b}, e.observe("ss", []*corev1.Pod{cachedPod("a", "11"), cachedPod("b", "19")}), "the cache lags")
	assert.Equal(t, []types.NamespacedName{b}, e.observe("ss", []*corev1.Pod{cachedPod("a", "12"), cachedPod("b", "19")}), "a seen at the version written")
	assert.Empty(t, e.observe("ss", []*corev1.Pod{cachedPod("a", "12"), cachedPod("b", "25")}), "b seen at a later version")

	// A pod no longer managed cannot be double-upgraded: forget it.
	e.expect("ss", b, "30")
	assert.Empty(t, e.observe("ss", []*corev1.Pod{cachedPod("a", "12")}))

	assert.Equal(t, []types.NamespacedName{a}, e.observe("other", []*corev1.Pod{cachedPod("a", "1")}), "per SidecarSet")
	e.forget("other")
	assert.Empty(t, e.observe("other", []*corev1.Pod{cachedPod("a", "1")}))

	// Non-integer resourceVersions are only satisfied by equality.
	e.expect("ss", a, "x2")
	assert.Equal(t, []types.NamespacedName{a}, e.observe("ss", []*corev1.Pod{cachedPod("a", "x3")}))
	assert.Empty(t, e.observe("ss", []*corev1.Pod{cachedPod("a", "x2")}))
}
