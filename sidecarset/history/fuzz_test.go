package history

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzRestore feeds arbitrary data.raw to the restore that injection runs for
// injectionStrategy.revision: ControllerRevisions are read from the API server, where anyone
// allowed to write them in the manager's namespace can put anything. It must answer a SidecarSet
// recording the revision, or an error naming both objects, never panic or change its input.
func FuzzRestore(f *testing.F) {
	ss := vectorSidecarSet()
	raw, err := Raw(ss)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte(`{"spec":{"$patch":"replace"}}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"x","image":1}],"$patch":"replace"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := ss.DeepCopy()
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "fuzz-1"}, Data: runtime.RawExtension{Raw: data}}
		out, err := Restore(in, cr)
		if err != nil {
			return
		}
		if out.Name != ss.Name || out.Status.LatestRevision != "fuzz-1" {
			t.Fatalf("restored %q at revision %q", out.Name, out.Status.LatestRevision)
		}
		if in.Status.LatestRevision != ss.Status.LatestRevision || in.ResourceVersion != ss.ResourceVersion {
			t.Fatal("the input SidecarSet was modified")
		}
	})
}
