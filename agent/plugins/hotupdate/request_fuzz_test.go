package hotupdate

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/storage"
)

// quietHost is a Host that keeps nothing: a fuzz run makes millions of requests.
type quietHost struct{}

func (quietHost) Logger() logr.Logger                                         { return logr.Discard() }
func (quietHost) Self() storage.Self                                          { return storage.Self{} }
func (quietHost) Store(context.Context, storage.Config, storage.Record) error { return nil }
func (quietHost) Kube() *storage.Kube                                         { return nil }
func (quietHost) Refused(string)                                              {}

// offline is a transport that never touches the network: it notes the URL it was asked for and
// refuses.
type offline struct {
	mu    sync.Mutex
	asked []*url.URL
}

func (o *offline) RoundTrip(r *http.Request) (*http.Response, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked = append(o.asked, r.URL)
	return nil, errors.New("offline")
}

func (o *offline) take() []*url.URL {
	o.mu.Lock()
	defer o.mu.Unlock()
	a := o.asked
	o.asked = nil
	return a
}

// FuzzUpdateRequest sends arbitrary bodies to POST /update as an authenticated caller, with a
// transport that never reaches the network. Whatever the body, the plugin must answer 400 (a bad
// request), 403 (a URL it may not download) or 502 (the refused download), never panic, and ask
// for nothing but URLs allowedURLPrefixes allows, for files inside fileDir.
func FuzzUpdateRequest(f *testing.F) {
	for _, seed := range []string{
		`{"url": "https://files.example.com/game/v2/game.cfg", "version": "v2"}`,
		`{"url": "https://files.example.com/game/v2/game.cfg", "version": "v2", "sha256": "` + strings.Repeat("ab", 32) + `", "fileName": "game.cfg"}`,
		`{"url": "http://10.0.0.5:8080/x.cfg", "version": "1"}`,
		`{"url": "https://files.example.com/game/../secret", "version": "v2"}`,
		`{"url": "https://files.example.com/game/%2e%2e/secret", "version": "v2"}`,
		`{"url": "https://files.example.com.evil.test/game/x", "version": "v2"}`,
		`{"url": "https://user:pw@files.example.com/game/x", "version": "v2"}`,
		`{"url": "http://169.254.169.254/latest/meta-data/", "version": "v2"}`,
		`{"url": "https://files.example.com/game/x", "version": "v2", "fileName": "../../etc/passwd"}`,
		`{"url": "https://files.example.com/game/x", "version": "v2", "fileName": ".hot-update-version"}`,
		`{"url": "https://files.example.com/game/x", "version": "v2", "sha256": "zz"}`,
		`{"url": "https://files.example.com/game/x", "version": "v2", "requestedBy": "admin"}`,
		`{"url": "x"}`,
		`{`,
		``,
		`[]`,
		`{"url": "https://files.example.com/game/x", "version": "v2"} trailing`,
	} {
		f.Add([]byte(seed))
	}
	dir := filepath.Join(f.TempDir(), "files")
	p := New().(*Plugin)
	cfg := &Config{FileDir: dir, Signal: Signal{ProcessName: "game", SignalName: "SIGHUP"},
		StorageConfig:      storage.Config{Type: storage.TypeInKube, InKube: &storage.InKubeConfig{AnnotationKey: "example.com/r"}},
		AllowedURLPrefixes: []string{"https://files.example.com/game/", "http://10.0.0.5:8080"}}
	if err := p.Init(cfg, quietHost{}); err != nil {
		f.Fatal(err)
	}
	if err := p.Start(context.Background(), nil); err != nil {
		f.Fatal(err)
	}
	tr := &offline{}
	p.client.Transport = tr
	h := p.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/update", strings.NewReader(string(body)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r.WithContext(agent.WithCaller(r.Context(), "fuzzer")))
		asked := tr.take()
		switch w.Code {
		case http.StatusBadRequest, http.StatusForbidden:
			if len(asked) > 0 {
				t.Fatalf("%d, but %v was asked for", w.Code, asked)
			}
		case http.StatusBadGateway:
			if len(asked) != 1 {
				t.Fatalf("502 after %d requests", len(asked))
			}
			if err := p.allowed.check(asked[0]); err != nil {
				t.Fatalf("asked for a URL the allow-list refuses: %v", err)
			}
		default:
			t.Fatalf("answer %d to %q: %s", w.Code, body, w.Body)
		}
		if req, err := decodeRequest(strings.NewReader(string(body))); err == nil {
			if target, err := p.check(req); err == nil && (filepath.Dir(target) != dir || filepath.Base(target) == versionFile) {
				t.Fatalf("request %+v would replace %s, outside fileDir or its version file", req, target)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Fatalf("fileDir holds %s after a download that cannot succeed", entries[0].Name())
		}
	})
}
