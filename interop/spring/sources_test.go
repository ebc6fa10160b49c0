package spring

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The Boot 3 and Boot 4 apps are one app built against two Spring
// generations, and the two eureka-client drivers one driver on two client
// versions (only Transport.java differs): each build folder is built on
// its own (interoptest copies one folder), so the shared sources are
// copies, and this keeps them from drifting apart.
func TestSharedJavaSources_stayIdentical(t *testing.T) {
	for _, pair := range [][2]string{
		{"boot4-client", "boot3-client"},
		{"eureka2-driver", "eureka1-driver"},
	} {
		for _, rel := range []string{
			"src/main/java/muster/interop/client/ClientApp.java",
			"src/main/java/muster/interop/client/ControlController.java",
			"src/main/resources/application.properties",
			"src/main/java/muster/interop/driver/EurekaDriver.java",
		} {
			a, errA := os.ReadFile(filepath.Join(pair[0], filepath.FromSlash(rel)))
			b, errB := os.ReadFile(filepath.Join(pair[1], filepath.FromSlash(rel)))
			if os.IsNotExist(errA) && os.IsNotExist(errB) {
				continue
			}
			if errA != nil || errB != nil {
				t.Fatalf("%s: %v / %v", rel, errA, errB)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs between %s and %s: change both", rel, pair[0], pair[1])
			}
		}
	}
}
