package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testLayouts writes an OCI layout per image as build does, around a few bytes standing in for each
// binary: pushing does not look into the binary, and building the real ones takes a minute.
func testLayouts(t *testing.T, tag string) (string, map[string]v1.Hash) {
	t.Helper()
	return testLayoutsAt(t, tag, time.Unix(testEpoch, 0))
}

// testLayoutsAt is testLayouts built at another time: another build, other digests.
func testLayoutsAt(t *testing.T, tag string, epoch time.Time) (string, map[string]v1.Hash) {
	t.Helper()
	dir, bins := t.TempDir(), t.TempDir()
	o := options{Version: tag, Epoch: epoch.UTC(), Platforms: platforms}
	labels := map[string]string{"org.opencontainers.image.version": tag}
	digests := map[string]v1.Hash{}
	for _, spec := range images {
		var exes []string
		for _, p := range platforms {
			exe := filepath.Join(bins, spec.Binary+"-"+p.Arch)
			require.NoError(t, os.WriteFile(exe, []byte("stands in for "+spec.Binary+" linux/"+p.Arch), 0o600))
			exes = append(exes, exe)
		}
		idx, err := imageIndex(o, spec, exes, []byte(testCA), labels)
		require.NoError(t, err)
		digests[spec.Name], err = writeLayout(filepath.Join(dir, spec.Name), idx, tag)
		require.NoError(t, err)
	}
	return dir, digests
}

// testRegistry is go-containerregistry's in-memory registry on a loopback port, which
// go-containerregistry reaches over plain HTTP without --insecure. It counts the requests that write.
type testRegistry struct {
	host   string
	writes atomic.Int64
}

func newTestRegistry(t *testing.T, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			r.writes.Add(1)
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// anonymous is a keychain with no credentials, so that the tests read no one's docker login.
var anonymous = authn.NewMultiKeychain()

// `make push` puts into the registry exactly what `make images` wrote: pulled back, every image has
// the layout's digest and manifest, and every blob its digest. Pushing again writes nothing.
func TestPushRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir, digests := testLayouts(t, testVersion)
	reg := newTestRegistry(t, nil)
	o := pushOptions{In: dir, Registry: reg.host + "/team", Version: testVersion, Timeout: time.Minute, Keychain: anonymous, Images: images}

	pushed, err := push(ctx, o)
	require.NoError(t, err)
	require.Len(t, pushed, len(images))
	for i, spec := range images {
		want := reg.host + "/team/" + spec.Name + ":" + testVersion + "@" + digests[spec.Name].String()
		assert.Equal(t, want, pushed[i].Ref(), "the line make push prints")

		ref, err := name.NewTag(reg.host + "/team/" + spec.Name + ":" + testVersion)
		require.NoError(t, err)
		pulled, err := remote.Index(ref, remote.WithContext(ctx))
		require.NoError(t, err)
		got, err := pulled.Digest()
		require.NoError(t, err)
		assert.Equal(t, digests[spec.Name], got, "%s: the digest pulled back", ref)
		require.NoError(t, validate.Index(pulled), "%s: every blob pulled back matches its digest", ref)

		local, _, _, err := readLayout(filepath.Join(dir, spec.Name))
		require.NoError(t, err)
		localManifest, err := local.RawManifest()
		require.NoError(t, err)
		pulledManifest, err := pulled.RawManifest()
		require.NoError(t, err)
		assert.JSONEq(t, string(localManifest), string(pulledManifest), "%s: the index, platform by platform", ref)
	}

	writes := reg.writes.Load()
	require.Positive(t, writes)
	again, err := push(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, pushed, again)
	assert.Equal(t, writes, reg.writes.Load(), "a second push finds everything in the registry and writes nothing")
}

// The default keychain finds `docker login`'s credentials, and podman's auth file when there is no
// Docker configuration.
func TestPushWithLoginCredentials(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME": home, "DOCKER_CONFIG": filepath.Join(home, ".docker"), "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_RUNTIME_DIR": "", "REGISTRY_AUTH_FILE": "",
	} {
		t.Setenv(k, v)
	}
	reg := newTestRegistry(t, basicAuth("pusher", "s3cret"))
	dir, _ := testLayouts(t, testVersion)
	o := pushOptions{In: dir, Registry: reg.host + "/team", Timeout: time.Minute, Keychain: authn.DefaultKeychain, Images: images}

	_, err := push(ctx, o)
	require.Error(t, err, "no credentials")
	var terr *transport.Error
	require.ErrorAs(t, err, &terr)
	assert.Equal(t, http.StatusUnauthorized, terr.StatusCode)
	assert.Contains(t, err.Error(), "image manager: reading "+reg.host+"/team/manager:"+testVersion+": ", "the check of the tag is the first request")

	authFile := writeAuthFile(t, filepath.Join(home, "podman-auth.json"), reg.host, "pusher", "s3cret")
	t.Setenv("REGISTRY_AUTH_FILE", authFile)
	_, err = push(ctx, o)
	require.NoError(t, err, "podman login's auth file")

	t.Setenv("REGISTRY_AUTH_FILE", "")
	writeAuthFile(t, filepath.Join(home, ".docker", "config.json"), reg.host, "pusher", "s3cret")
	_, err = push(ctx, o)
	require.NoError(t, err, "docker login's config.json")
}

func basicAuth(user, password string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "credentials needed", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// writeAuthFile writes what `docker login` and `podman login` write: the same JSON.
func writeAuthFile(t *testing.T, path, host, user, password string) string {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	b, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": auth}}})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// A registry that does not answer fails the push at --timeout, saying so.
func TestPushTimeout(t *testing.T) {
	reg := newTestRegistry(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	})
	dir, _ := testLayouts(t, testVersion)
	start := time.Now()
	_, err := push(context.Background(), pushOptions{In: dir, Registry: reg.host + "/team", Timeout: 300 * time.Millisecond, Keychain: anonymous, Images: images})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Contains(t, err.Error(), "image manager: reading "+reg.host+"/team/manager:"+testVersion+": not done within --timeout 300ms: ")
}

// What push refuses before it connects: layouts of another version, and no layouts.
func TestPushRefuses(t *testing.T) {
	reg := newTestRegistry(t, nil)
	dir, _ := testLayouts(t, testVersion)
	o := pushOptions{In: dir, Registry: reg.host + "/team", Version: "v1.2.3", Timeout: time.Minute, Keychain: anonymous, Images: images}
	_, err := push(context.Background(), o)
	require.EqualError(t, err, "image manager: "+filepath.Join(dir, "manager")+" holds version "+testVersion+", not v1.2.3: run make images VERSION=v1.2.3 first")

	o.In, o.Version = t.TempDir(), ""
	_, err = push(context.Background(), o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "image manager: OCI layout "+filepath.Join(o.In, "manager")+": ")
	assert.Contains(t, err.Error(), "(run make images first)")

	o.In, o.Registry = dir, "Not A Registry"
	_, err = push(context.Background(), o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `image manager: --registry "Not A Registry": `)
	assert.Zero(t, reg.writes.Load())
}

// A tag the registry holds for another build is not moved unless asked: nodes that pulled the
// version by tag would otherwise run something else than nodes that pull it later.
func TestPushKeepsAPublishedTag(t *testing.T) {
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	first, _ := testLayouts(t, testVersion)
	o := pushOptions{In: first, Registry: reg.host + "/team", Timeout: time.Minute, Keychain: anonymous, Images: images}
	published, err := push(ctx, o)
	require.NoError(t, err)

	// Another build of the same version: a different time in it, so different digests.
	rebuilt, changed := testLayoutsAt(t, testVersion, time.Unix(testEpoch+60, 0))
	require.NotEqual(t, published[0].Digest, changed["manager"])
	o.In = rebuilt
	writes := reg.writes.Load()
	_, err = push(ctx, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "image manager: "+reg.host+"/team/manager:"+testVersion+" is "+published[0].Digest.String()+" in the registry, not "+changed["manager"].String())
	assert.Contains(t, err.Error(), "a published tag is not moved (--overwrite moves it")
	assert.Equal(t, writes, reg.writes.Load(), "nothing written")

	o.Overwrite = true
	moved, err := push(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, changed["manager"], moved[0].Digest)
}
