package render

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Objects are rendered objects by Key.
type Objects map[string]*unstructured.Unstructured

// Key names an object within an installation: kind, namespace (if any) and name.
func Key(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + "/" + ns + "/" + u.GetName()
	}
	return u.GetKind() + "/" + u.GetName()
}

// Parse splits a multi-document YAML stream into objects; empty documents are skipped, two objects
// with one Key are an error.
func Parse(stream []byte) (Objects, error) {
	objs := Objects{}
	for i, doc := range strings.Split("\n"+string(stream), "\n---") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		k := Key(&u)
		if _, dup := objs[k]; dup {
			return nil, fmt.Errorf("document %d: %s rendered twice", i, k)
		}
		objs[k] = &u
	}
	return objs, nil
}

// Kustomize renders dir with `kubectl kustomize`.
func Kustomize(dir string) (Objects, error) {
	out, err := run(exec.Command("kubectl", "kustomize", dir))
	if err != nil {
		return nil, err
	}
	return Parse(out)
}

// HelmBinary is the Helm `make tools` built, from SIDECAROPS_HELM.
func HelmBinary() (string, error) {
	p := os.Getenv("SIDECAROPS_HELM")
	if p == "" {
		return "", errors.New("SIDECAROPS_HELM is not set: run the tests through `make test` (it builds the pinned helm with `make tools`)")
	}
	return p, nil
}

// Helm runs helm with args, with its configuration, cache and data in home (so that nothing of the
// user's Helm is read or written), and returns its standard output.
func Helm(home string, args ...string) ([]byte, error) {
	bin, err := HelmBinary()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache", "HELM_DATA_HOME="+home+"/data")
	return run(cmd)
}

// Chart renders chart with `helm template` as release name in namespace, with the values files and
// --set arguments given.
func Chart(home, chart, name, namespace string, valuesFiles []string, sets ...string) (Objects, error) {
	args := []string{"template", name, chart, "--namespace", namespace}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := Helm(home, args...)
	if err != nil {
		return nil, err
	}
	return Parse(out)
}

func run(cmd *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
