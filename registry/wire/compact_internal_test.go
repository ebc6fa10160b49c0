package wire

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/muster-registry/muster/registry"
)

// A decoded instance must not keep its request body alive: all its strings
// live in one block no larger than their total length.
func TestDecodeInstanceJSON_doesNotPinTheBody(t *testing.T) {
	body := `{"instance":{"instanceId":"host-a:orders:8080","hostName":"host-a","app":"orders","ipAddr":"10.0.0.12",` +
		`"status":"UP","dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},` +
		`"metadata":{"zone":"z1","padding":"` + strings.Repeat("x", 4000) + `"},"vipAddress":"orders"}}`
	in, err := DecodeInstanceJSON([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var lo, hi uintptr
	total := 0
	eachString(in, func(s *string) {
		if len(*s) == 0 {
			return
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(*s)))
		if lo == 0 || p < lo {
			lo = p
		}
		if end := p + uintptr(len(*s)); end > hi {
			hi = end
		}
		total += len(*s)
	})
	if span := int(hi - lo); span != total {
		t.Fatalf("strings span %d bytes for %d bytes of content: they still point into the body", span, total)
	}
	if in.DataCenterInfo.Class != registry.DataCenterClassDefault || in.Status != registry.StatusUp {
		t.Fatalf("decoded %+v", in)
	}
}
