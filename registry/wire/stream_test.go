package wire_test

import (
	"bytes"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// The streaming encoder writes exactly what the append encoder builds, for
// documents small and large enough to be written in several chunks.
func TestWriteApplications_sameBytesAsAppend(t *testing.T) {
	docs := map[string][]registry.AppView{
		"empty": nil, "full": fullApps(), "delta": deltaApps(), "large": benchRegistry(2000),
	}
	for name, apps := range docs {
		hash := registry.HashcodeOf(apps)
		var jb bytes.Buffer
		if err := wire.WriteApplicationsJSON(&jb, apps, "3", hash); err != nil {
			t.Fatal(err)
		}
		if want := wire.AppendApplicationsJSON(nil, apps, "3", hash); !bytes.Equal(jb.Bytes(), want) {
			t.Errorf("%s: WriteApplicationsJSON differs from AppendApplicationsJSON (%d vs %d bytes)", name, jb.Len(), len(want))
		}
	}
}
