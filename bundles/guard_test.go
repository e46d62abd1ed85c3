package bundles

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/randomobjects"
)

// collidable (compile.go) lists the SidecarSets that could collide, so that the match policy
// compares only their pairs; _collide (policies/match.rego) says what a collision is. The two are
// kept by hand, and TestCollidableIsExact varies only the names a collision is known to be made
// of. Here whole SidecarSets are filled at random and then given values of one another — a whole
// spec field, a list element, a field deep inside one (a volume's name alone: the same name, another
// definition) — found by reflection, so that whatever a new kind of collision compares is
// sometimes equal and sometimes not, and collidable must still list exactly the SidecarSets
// _collide pairs. If this fails, collidable and _collide must learn the same kinds of collision.
func TestCollidableEveryField(t *testing.T) {
	listed, judged := 0, 0
	for round := range 60 {
		f := randomobjects.Filler(t, int64(round))
		r := rand.New(rand.NewPCG(uint64(round), 2))
		sets := make([]*v1beta1.SidecarSet, 5)
		for i := range sets {
			sets[i] = &v1beta1.SidecarSet{}
			f.Fill(&sets[i].Spec)
			sets[i].Name = fmt.Sprintf("ss-%d", i)
		}
		for range 8 {
			dst, src := sets[r.IntN(len(sets))], sets[r.IntN(len(sets))]
			share(r, reflect.ValueOf(&dst.Spec).Elem(), reflect.ValueOf(&src.Spec).Elem())
		}
		b, err := compileBundle(State{SidecarSets: sets})
		require.NoError(t, err, "round %d", round)
		got, want := collidableAndColliding(t, b)
		require.Equal(t, want, got, "round %d", round)
		listed += len(got)
		judged += len(sets)
	}
	// Both outcomes must occur for the agreement to mean anything.
	require.Greater(t, listed, judged/10, "too few collidable: %d of %d", listed, judged)
	require.Less(t, listed, judged*9/10, "too many collidable: %d of %d", listed, judged)
}

// share gives dst one value of src, at a depth chosen at random: a whole struct field, or one
// element of a list into dst's list, or, going further down, a field of those.
func share(r *rand.Rand, dst, src reflect.Value) {
	switch dst.Kind() {
	case reflect.Struct:
		i := r.IntN(dst.NumField())
		if !dst.Field(i).CanSet() {
			return
		}
		if r.IntN(3) == 0 {
			dst.Field(i).Set(src.Field(i))
			return
		}
		share(r, dst.Field(i), src.Field(i))
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		if dst.IsNil() {
			dst.Set(reflect.New(dst.Type().Elem()))
		}
		share(r, dst.Elem(), src.Elem())
	case reflect.Slice:
		if src.Len() == 0 {
			return
		}
		from := src.Index(r.IntN(src.Len()))
		if dst.Len() == 0 || r.IntN(3) == 0 {
			dst.Set(reflect.Append(dst, from))
			return
		}
		share(r, dst.Index(r.IntN(dst.Len())), from)
	default:
		dst.Set(src)
	}
}
