package wire

import (
	"strings"

	"github.com/muster-registry/muster/registry"
)

// The data center names of Eureka's DataCenterInfo.Name enum.
const (
	dataCenterNetflix = "Netflix"
	dataCenterAmazon  = "Amazon"
	dataCenterMyOwn   = "MyOwn"
)

// dataCenterClass is the Java class name written for dc (JSON @class, XML
// class attribute). Eureka derives it from the name alone, whatever class a
// client registered with (EurekaJacksonCodec.DataCenterInfoSerializer,
// Converters.InstanceInfoConverter#marshal, DataCenterTypeInfoResolver),
// and so does this: Java clients resolve @class to a class, so a client
// that registered with an odd class name must not break every Java client's
// fetch. dc.Class is used only for a name the decoders would have refused.
func dataCenterClass(dc registry.DataCenterInfo) string {
	switch dc.Name {
	case dataCenterAmazon:
		return registry.DataCenterClassAmazon
	case dataCenterMyOwn, dataCenterNetflix:
		return registry.DataCenterClassDefault
	}
	if dc.Class != "" {
		return dc.Class
	}
	return registry.DataCenterClassDefault
}

// defaultDataCenterClass is the class a decoded dataCenterInfo gets when
// the body names none.
func defaultDataCenterClass(name string) string {
	if name == dataCenterAmazon {
		return registry.DataCenterClassAmazon
	}
	return registry.DataCenterClassDefault
}

// canonicalDataCenterName maps a received data center name to Eureka's
// spelling. Eureka accepts only its enum's names and answers 400 to others
// (Name.valueOf in the JSON codec, DataCenterInfoConverter#unmarshal in
// XML, which also takes "amazon" in any case). Muster takes all three in
// any case. "" stays "" so that the registry's Validate can name it.
func canonicalDataCenterName(name string) (string, bool) {
	switch {
	case name == "":
		return "", true
	case strings.EqualFold(name, dataCenterMyOwn):
		return dataCenterMyOwn, true
	case strings.EqualFold(name, dataCenterAmazon):
		return dataCenterAmazon, true
	case strings.EqualFold(name, dataCenterNetflix):
		return dataCenterNetflix, true
	}
	return "", false
}
