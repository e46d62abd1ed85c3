package bundles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/policies"
)

// Builder compiles successive States, remembering what it made of each object. Objects are
// recognised by identity: callers replace an object when it changes and never modify one they have
// handed over (the policy loader hands over the informer cache's own), so a State that differs from the
// previous one in a few objects costs normalising, hashing and rendering only those few. The zero
// value is ready; a Builder is not safe for concurrent use.
type Builder struct {
	sets       map[string]*setPart
	namespaces map[string]*docPart[*corev1.Namespace]
	owners     ast.Object // of sets
	collidable ast.Object // of owners
}

// Build is one compiled State: the data document, the index rules of each SidecarSet, and the
// revision that identifies both. It shares its values with earlier and later Builds of the same
// Builder, and nobody may modify them.
type Build struct {
	// Revision is a digest of the content: the same State compiles to the same revision on every
	// replica and after restarts, whatever the Builder compiled before.
	Revision string
	// Data is the data document under Root ({"sidecarops": {"state": ...}}), as OPA values.
	Data ast.Object
	// Rules are each SidecarSet's rules of the generated index module, rendered by IndexRules
	// ("" for one that can never inject).
	Rules map[string]string
}

// Bundle is the Build as a bundle that stock `opa` reads: the data, the policies and the index
// module holding every SidecarSet's rules. Modules are parsed here, once, so that loading the
// bundle into the engine only compiles.
func (b *Build) Bundle() (*bundle.Bundle, error) {
	data, err := ast.JSON(b.Data)
	if err != nil {
		return nil, fmt.Errorf("bundle data: %w", err)
	}
	sources := policies.Modules()
	sources[IndexModulePath] = IndexModule(IndexPackage, b.Rules)
	out := &bundle.Bundle{
		Manifest: bundle.Manifest{Roots: &[]string{Root}, RegoVersion: regoV1(), Revision: b.Revision},
		Data:     data.(map[string]any),
	}
	parsed, err := ParseModules(sources)
	if err != nil {
		return nil, err
	}
	for _, path := range slices.Sorted(maps.Keys(sources)) {
		out.Modules = append(out.Modules, bundle.ModuleFile{
			URL: "/" + path, Path: "/" + path, RelativePath: path, Raw: []byte(sources[path]), Parsed: parsed[path],
		})
	}
	return out, nil
}

// ParseModules parses Rego v1 sources by bundle path.
func ParseModules(sources map[string]string) (map[string]*ast.Module, error) {
	out := make(map[string]*ast.Module, len(sources))
	for path, src := range sources {
		m, err := ast.ParseModuleWithOpts(path, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("bundle module %s: %w", path, err)
		}
		out[path] = m
	}
	return out, nil
}

// setPart is what a SidecarSet contributes to a Build.
type setPart struct {
	obj    *v1beta1.SidecarSet
	doc    ast.Value
	digest [sha256.Size]byte // of the document and the rules: the SidecarSet's share of the revision
	rules  string
	base   string // the base SidecarSet when this one is a canary (compat §1.21)
	canary bool
	owned  ownedNames
}

// ownedNames are the names a SidecarSet could collide on (see owners).
type ownedNames struct {
	containers, initContainers, annotations []string
	volumes                                 [][2]string // name, definition digest
}

func (o ownedNames) equal(p ownedNames) bool {
	return slices.Equal(o.containers, p.containers) && slices.Equal(o.initContainers, p.initContainers) &&
		slices.Equal(o.annotations, p.annotations) && slices.Equal(o.volumes, p.volumes)
}

type docPart[T any] struct {
	obj    T
	doc    ast.Value
	digest [sha256.Size]byte
}

// Build compiles st, reusing what it made of every object it has seen before.
func (b *Builder) Build(st State) (*Build, error) {
	sets := make(map[string]*setPart, len(st.SidecarSets))
	for _, ss := range st.SidecarSets {
		if _, dup := sets[ss.Name]; dup {
			return nil, fmt.Errorf("SidecarSet/%s: metadata.name: duplicate SidecarSet name", ss.Name)
		}
		p := b.sets[ss.Name]
		if p == nil || p.obj != ss {
			var err error
			if p, err = newSetPart(ss); err != nil {
				return nil, err
			}
		}
		sets[ss.Name] = p
	}
	namespaces, err := reuseDocs(b.namespaces, st.Namespaces, func(ns *corev1.Namespace) string { return ns.Name }, namespaceDoc)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(st.SidecarSets))
	for _, ss := range st.SidecarSets {
		names = append(names, ss.Name)
	}
	if !slices.IsSorted(names) { // the loader hands them over sorted
		slices.Sort(names)
	}
	if b.owners == nil || !sameOwners(b.sets, sets) {
		b.owners = owners(sets, names)
		b.collidable = collidable(b.owners)
	}
	// Only now, when nothing can fail: a failed Build leaves the Builder as it was.
	b.sets, b.namespaces = sets, namespaces

	out := &Build{Rules: make(map[string]string, len(sets))}
	setDocs := ast.NewObject()
	canaries := ast.NewObject()
	h := sha256.New()
	h.Write(staticDigest())
	for _, name := range names {
		p := sets[name]
		key := ast.StringTerm(name)
		setDocs.Insert(key, ast.NewTerm(p.doc))
		if p.canary {
			canaries.Insert(key, ast.StringTerm(p.base))
		}
		out.Rules[name] = p.rules
		fmt.Fprintf(h, "\x00s%s\x00", name)
		h.Write(p.digest[:])
	}
	nsDocs := docsObject(h, "n", namespaces)
	out.Revision = hex.EncodeToString(h.Sum(nil))[:20]
	state := ast.NewObject(
		ast.Item(ast.StringTerm("sidecarsets"), ast.NewTerm(setDocs)),
		ast.Item(ast.StringTerm("namespaces"), ast.NewTerm(nsDocs)),
		ast.Item(ast.StringTerm("owners"), ast.NewTerm(b.owners)),
		ast.Item(ast.StringTerm("collidable"), ast.NewTerm(b.collidable)),
		ast.Item(ast.StringTerm("canaries"), ast.NewTerm(canaries)),
	)
	out.Data = ast.NewObject(ast.Item(ast.StringTerm(Root), ast.NewTerm(ast.NewObject(ast.Item(ast.StringTerm("state"), ast.NewTerm(state))))))
	return out, nil
}

func newSetPart(ss *v1beta1.SidecarSet) (*setPart, error) {
	doc, err := Document(ss)
	if err != nil {
		return nil, err
	}
	p := &setPart{obj: ss, rules: IndexRules(ss)}
	p.base, p.canary = canaryBase(ss)
	if p.doc, p.digest, err = astDoc(doc, p.rules); err != nil {
		return nil, fmt.Errorf("SidecarSet/%s: %w", ss.Name, err)
	}
	for _, c := range ss.Spec.Containers {
		p.owned.containers = append(p.owned.containers, c.Name)
	}
	for _, c := range ss.Spec.InitContainers {
		p.owned.initContainers = append(p.owned.initContainers, c.Name)
	}
	hashes := doc["volumeHashes"].(map[string]any)
	for _, v := range ss.Spec.Volumes {
		p.owned.volumes = append(p.owned.volumes, [2]string{v.Name, hashes[v.Name].(string)})
	}
	for _, patch := range ss.Spec.PatchPodMetadata {
		if patch.PatchPolicy != v1beta1.SidecarSetRetainPatchPolicy {
			p.owned.annotations = append(p.owned.annotations, slices.Sorted(maps.Keys(patch.Annotations))...)
		}
	}
	return p, nil
}

// sameOwners reports whether the owners index of prev serves next: the same SidecarSets, each
// owning the same names (most changes, to a selector or an image, change none).
func sameOwners(prev, next map[string]*setPart) bool {
	if len(prev) != len(next) {
		return false
	}
	for name, p := range next {
		q := prev[name]
		if q == nil {
			return false
		}
		if q != p && !q.owned.equal(p.owned) {
			return false
		}
	}
	return true
}

// reuseDocs converts each object of objs into its data document, reusing the previous conversion
// of the very same object.
func reuseDocs[T comparable](prev map[string]*docPart[T], objs []T, name func(T) string, doc func(T) map[string]any) (map[string]*docPart[T], error) {
	out := make(map[string]*docPart[T], len(objs))
	for _, o := range objs {
		n := name(o)
		if p := prev[n]; p != nil && p.obj == o {
			out[n] = p
			continue
		}
		v, digest, err := astDoc(doc(o), "")
		if err != nil {
			return nil, err
		}
		out[n] = &docPart[T]{obj: o, doc: v, digest: digest}
	}
	return out, nil
}

// docsObject is the data object of one kind's documents by name; it adds their names and digests,
// in name order, to the revision hash h.
func docsObject[T any](h interface{ Write([]byte) (int, error) }, kind string, parts map[string]*docPart[T]) ast.Object {
	obj := ast.NewObject()
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		obj.Insert(ast.StringTerm(name), ast.NewTerm(parts[name].doc))
		fmt.Fprintf(h, "\x00%s%s\x00", kind, name)
		_, _ = h.Write(parts[name].digest[:])
	}
	return obj
}

// astDoc converts a document for the policy store and digests it together with extra.
func astDoc(doc map[string]any, extra string) (ast.Value, [sha256.Size]byte, error) {
	raw, err := json.Marshal(doc) // encoding/json sorts map keys: canonical enough for a digest
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	v, err := ast.InterfaceToValue(doc)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	return v, sha256.Sum256(append(append(raw, 0), extra...)), nil
}

// staticDigest digests the embedded policies, so that a release with other policies gives the
// same State another revision.
var staticDigest = sync.OnceValue(func() []byte {
	h := sha256.New()
	sources := policies.Modules()
	for _, path := range slices.Sorted(maps.Keys(sources)) {
		fmt.Fprintf(h, "\x00%s\x00%s", path, sources[path])
	}
	return h.Sum(nil)
})
