package agent

import (
	"strings"
	"testing"
)

// FuzzParseConfig feeds arbitrary config.yaml contents to the parser the agent runs at start and on
// every reload: it must answer a configuration or an error naming the file, never panic.
func FuzzParseConfig(f *testing.F) {
	reg := registry(&journal{}, "http_probe", "hot_update")
	f.Add([]byte("plugins: [{name: http_probe, bootOrder: 1, config: {tag: x}}]\nrestartPolicy: Always\n"))
	f.Add([]byte("plugins: []"))
	f.Add([]byte("plugins: [{name: dns_probe}]"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("agent.yaml", data, reg)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "agent.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if cfg == nil {
			t.Fatal("no configuration and no error")
		}
	})
}
