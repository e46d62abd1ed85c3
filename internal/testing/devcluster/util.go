package devcluster

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
)

func writeKubeconfig(raw []byte) (string, error) {
	dir, err := os.MkdirTemp("", "sidecarops-kubeconfig-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, raw, 0o600)
}

// FreeAddr is a loopback address with a port free now, for a server a test starts (the manager's
// probes and metrics, a second replica's webhook).
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func httpOK(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}
