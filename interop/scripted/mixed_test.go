package scripted

import (
	"fmt"
	"testing"

	"github.com/muster-registry/muster/interop/interoptest"
)

// Both clients on one node, each registering its own way (eureka-js-client
// with real booleans in its port, py-eureka-client with the legacy
// overriddenstatus key and strings for booleans), each reading the other's
// instance from its own cache: JSON for one, XML for the other. Nothing one
// registers may break the other's fetch.
func TestMixedClients_seeEachOther(t *testing.T) {
	jsDir, pyDir := built(t, jsClient), built(t, pyClient)
	node := interoptest.NewNode(t).Start()
	jsTap, pyTap := interoptest.NewWireTap(t, node.Base()), interoptest.NewWireTap(t, node.Base())
	jsApp, jsID, jsPort := newID(t, jsClient, "mixed")
	pyApp, pyID, pyPort := newID(t, pyClient, "mixed")
	js := startDriver(t, jsClient, jsDir, driverConfig{
		ServiceURLs: []string{jsClient.serviceURL(jsTap.URL() + "/eureka/")},
		App:         jsApp, InstanceID: jsID, Port: jsPort, Delta: true,
		Metadata: map[string]string{"lang": "js"},
	})
	py := startDriver(t, pyClient, pyDir, driverConfig{
		ServiceURLs: []string{pyClient.serviceURL(pyTap.URL() + "/eureka/")},
		App:         pyApp, InstanceID: pyID, Port: pyPort,
		Metadata: map[string]string{"lang": "py"},
	})
	sees := func(app, id, lang string) func(view) error {
		return func(v view) error {
			in, ok := v.find(app, id)
			if !ok || in.Status != "UP" || in.Metadata["lang"] != lang {
				return fmt.Errorf("%s/%s: %+v", app, id, in)
			}
			return nil
		}
	}
	js.waitView("the py client's instance in the js client's cache", jsTap, sees(pyApp, pyID, "py"))
	py.waitView("the js client's instance in the py client's cache", pyTap, sees(jsApp, jsID, "js"))
	mustNoFailures(t, js, jsTap)
	mustNoFailures(t, py, pyTap)
}
