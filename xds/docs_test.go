package xds_test

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	grpcxds "google.golang.org/grpc/xds"
	"google.golang.org/protobuf/encoding/protojson"
)

var fence = regexp.MustCompile("(?s)```(yaml|json)\n(.*?)```")

// TestDocs_examples: the Envoy configurations of docs/xds.md are valid
// Envoy bootstraps (Envoy's own types and validation rules), and its gRPC
// bootstrap is accepted by grpc-go's parser.
func TestDocs_examples(t *testing.T) {
	doc, err := os.ReadFile("../docs/xds.md")
	if err != nil {
		t.Fatal(err)
	}
	envoys, grpcs := 0, 0
	for _, m := range fence.FindAllStringSubmatch(string(doc), -1) {
		lang, body := m[1], m[2]
		switch {
		case lang == "json":
			grpcs++
			if _, err := grpcxds.NewXDSResolverWithConfigForTesting([]byte(body)); err != nil {
				t.Errorf("gRPC bootstrap: %v\n%s", err, body)
			}
		case regexp.MustCompile(`(?m)^(static_resources|node|dynamic_resources):`).MatchString(body):
			envoys++
			var v any
			if err := yaml.Unmarshal([]byte(body), &v); err != nil {
				t.Fatalf("Envoy example: %v", err)
			}
			js, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var b bootstrapv3.Bootstrap
			if err := protojson.Unmarshal(js, &b); err != nil {
				t.Errorf("Envoy example is no bootstrap: %v\n%s", err, body)
				continue
			}
			if err := b.ValidateAll(); err != nil {
				t.Errorf("Envoy example: %v", err)
			}
		}
	}
	if envoys != 2 || grpcs != 1 {
		t.Errorf("found %d Envoy and %d gRPC examples, want 2 and 1", envoys, grpcs)
	}
}
