package perfinputs

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/sidecarset/versions"
)

//go:embed gen_inputs.py
var generator []byte

// Generate writes the inputs for every size into dir (dir/<N>/...), running the embedded generator
// with its default seed.
func Generate(dir string, sizes ...int) error {
	list := make([]string, len(sizes))
	for i, n := range sizes {
		list[i] = strconv.Itoa(n)
	}
	cmd := exec.Command("python3", "-", "--out", dir, "--sizes", strings.Join(list, ","))
	cmd.Stdin = bytes.NewReader(generator)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gen_inputs.py: %w: %s", err, out)
	}
	return nil
}

// Inputs are one size's inputs, ready for injector.Snapshot and injector.Pod.
type Inputs struct {
	// SidecarSets are defaulted and hashed, as the snapshot holds them.
	SidecarSets []*v1beta1.SidecarSet
	Namespaces  []*corev1.Namespace
	// Pod is the pod as decoded from the API server's JSON, PodJSON.
	Pod     *corev1.Pod
	PodJSON []byte
	// Matches are the SidecarSets the generator made select the pod, sorted by name.
	Matches []string
}

// Load reads the inputs of size n that Generate wrote into dir.
func Load(dir string, n int) (*Inputs, error) {
	base := filepath.Join(dir, strconv.Itoa(n))
	objs, err := manifest.Read(nil, filepath.Join(base, "sidecarsets.yaml"), filepath.Join(base, "namespace.yaml"), filepath.Join(base, "pod.yaml"))
	if err != nil {
		return nil, err
	}
	in := &Inputs{}
	for _, o := range objs {
		switch obj := o.Obj.(type) {
		case *corev1.Namespace:
			in.Namespaces = append(in.Namespaces, obj)
		case *corev1.Pod:
			in.Pod = obj
		default:
			w, err := versions.Of(obj)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o, err)
			}
			if err := defaults.SidecarSetAndHash(w.Hub); err != nil {
				return nil, fmt.Errorf("%s: %w", o, err)
			}
			in.SidecarSets = append(in.SidecarSets, w.Hub)
		}
	}
	if in.Pod == nil || len(in.SidecarSets) != n {
		return nil, fmt.Errorf("%s: want %d SidecarSets and a pod, got %d and %v", base, n, len(in.SidecarSets), in.Pod != nil)
	}
	if in.PodJSON, err = json.Marshal(in.Pod); err != nil {
		return nil, err
	}
	if in.Matches, err = expectedMatches(filepath.Join(base, "sidecarsets.yaml")); err != nil {
		return nil, err
	}
	return in, nil
}

// expectedMatches reads the generator's "# expected-matches: a,b" header line.
func expectedMatches(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for i := 0; i < 5 && sc.Scan(); i++ {
		if rest, ok := strings.CutPrefix(sc.Text(), "# expected-matches: "); ok {
			return strings.Split(rest, ","), nil
		}
	}
	return nil, fmt.Errorf("%s: no expected-matches header", path)
}
