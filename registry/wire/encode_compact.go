package wire

import (
	"slices"
	"strconv"

	"github.com/muster-registry/muster/registry"
)

// The compact form. A Eureka client that sends X-Eureka-Accept: compact
// (eureka.clientDataAccept=compact) reads registry documents with the
// JacksonJsonMini codec, and the Java server answers its full, delta, app
// and VIP fetches with the JacksonJsonMini / JacksonXmlMini encoders
// (DefaultServerCodecs, ResponseCacheImpl's Key with EurekaAccept.compact).
// Those are the newer Jackson codecs (EurekaJsonJacksonCodec,
// EurekaXmlJacksonCodec) with MiniInstanceInfoMixIn, which keeps only what
// a client needs to route a call: instanceId, app, ipAddr, vipAddress,
// secureVipAddress, dataCenterInfo (an Amazon one with only instance-id,
// public-ipv4, public-hostname, local-ipv4 and availability-zone, as
// AbstractEurekaJacksonCodec's filter keeps), hostName, status,
// lastUpdatedTimestamp, actionType, asgName, port and securePort. There is
// no overriddenStatus, metadata, leaseInfo, sid, countryId, URLs or
// lastDirtyTimestamp. The order is that codec's: the bean's properties, then
// the ports (InstanceInfoJsonBeanSerializer), lastUpdatedTimestamp as a
// number; and its applications serializer writes versions__delta and
// apps__hashcode after the application array, in both formats. The
// hashcode is the full registry's: it counts statuses, which the compact
// form keeps, so a compact client's delta reconciliation works as a full
// one's does. Field values follow the full encoders' rules (an empty
// optional field is left out, in particular an empty instanceId).

// ApplicationsHeaderCompactJSON starts a compact applications document, up
// to and including the application array's '['.
const ApplicationsHeaderCompactJSON = `{"applications":{"application":[`

// AppendApplicationsFooterCompactJSON ends a compact applications document:
// the array's end, then versions__delta and apps__hashcode.
func AppendApplicationsFooterCompactJSON(b []byte, versionsDelta, hashcode string) []byte {
	b = append(b, `],"versions__delta":`...)
	b = appendJSONString(b, versionsDelta)
	b = append(b, `,"apps__hashcode":`...)
	b = appendJSONString(b, hashcode)
	return append(b, "}}"...)
}

// AppendApplicationsCompactJSON appends a compact applications document:
// its header, the apps' compact bodies separated by commas, and its footer,
// byte for byte what an incremental encoder joins from cached pieces.
func AppendApplicationsCompactJSON(b []byte, apps []registry.AppView, versionsDelta, hashcode string) []byte {
	b = slices.Grow(b, estimateAppsCompact(apps)+len(versionsDelta)+len(hashcode)+96)
	b = append(b, ApplicationsHeaderCompactJSON...)
	for i, app := range apps {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendApplicationBodyCompactJSON(b, app)
	}
	return AppendApplicationsFooterCompactJSON(b, versionsDelta, hashcode)
}

// AppendApplicationBodyCompactJSON appends one application object in the
// compact form, {"name":…,"instance":[…]}.
func AppendApplicationBodyCompactJSON(b []byte, app registry.AppView) []byte {
	b = slices.Grow(b, estimateAppCompact(app))
	return appendApplicationBodyCompactJSON(b, app)
}

// AppendApplicationCompactJSON appends one application in the compact form:
// {"application":{"name":…,"instance":[…]}}.
func AppendApplicationCompactJSON(b []byte, app registry.AppView) []byte {
	b = slices.Grow(b, estimateAppCompact(app)+24)
	b = append(b, `{"application":`...)
	b = appendApplicationBodyCompactJSON(b, app)
	return append(b, '}')
}

func appendApplicationBodyCompactJSON(b []byte, app registry.AppView) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, app.Name)
	b = append(b, `,"instance":[`...)
	first := true
	for _, iv := range app.Instances {
		if iv.Instance == nil {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendInstanceCompactJSON(b, iv.Instance)
	}
	return append(b, "]}"...)
}

func appendInstanceCompactJSON(b []byte, in *registry.Instance) []byte {
	b = append(b, '{')
	if in.InstanceID != "" {
		b = append(b, `"instanceId":`...)
		b = appendJSONString(b, in.InstanceID)
		b = append(b, ',')
	}
	b = append(b, `"app":`...)
	b = appendJSONString(b, in.App)
	b = append(b, `,"ipAddr":`...)
	b = appendJSONString(b, in.IPAddr)
	b = appendOptionalJSON(b, `,"vipAddress":`, in.VIPAddress)
	b = appendOptionalJSON(b, `,"secureVipAddress":`, in.SecureVIPAddress)
	if dc := in.DataCenterInfo; dc.Name != "" {
		b = append(b, `,"dataCenterInfo":{"@class":`...)
		b = appendJSONString(b, dataCenterClass(dc))
		b = append(b, `,"name":`...)
		b = appendJSONString(b, dc.Name)
		if dc.Name == dataCenterAmazon {
			b = append(b, `,"metadata":{`...)
			first := true
			for _, kv := range dc.Metadata {
				if !compactAmazonKey(kv.Key) {
					continue
				}
				if !first {
					b = append(b, ',')
				}
				first = false
				b = appendJSONString(b, kv.Key)
				b = append(b, ':')
				b = appendJSONString(b, kv.Value)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	b = append(b, `,"hostName":`...)
	b = appendJSONString(b, in.HostName)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, statusName(in.Status))
	b = append(b, `,"lastUpdatedTimestamp":`...)
	b = strconv.AppendInt(b, in.LastUpdatedTimestamp, 10)
	b = appendOptionalJSON(b, `,"actionType":`, string(in.ActionType))
	b = appendOptionalJSON(b, `,"asgName":`, in.ASGName)
	b = append(b, `,"port":{"$":`...)
	b = strconv.AppendInt(b, int64(in.Port.Number), 10)
	b = appendEnabledJSON(b, in.Port.Enabled)
	b = append(b, `,"securePort":{"$":`...)
	b = strconv.AppendInt(b, int64(in.SecurePort.Number), 10)
	b = appendEnabledJSON(b, in.SecurePort.Enabled)
	return append(b, '}')
}

// compactAmazonKey reports whether the compact form keeps an Amazon data
// center's metadata entry (AbstractEurekaJacksonCodec's
// MINI_AMAZON_INFO_INCLUDE_KEYS).
func compactAmazonKey(key string) bool {
	switch key {
	case "instance-id", "public-ipv4", "public-hostname", "local-ipv4", "availability-zone":
		return true
	}
	return false
}

// ApplicationsHeaderCompactXML starts a compact applications document.
const ApplicationsHeaderCompactXML = "<applications>"

// AppendApplicationsFooterCompactXML ends a compact applications document:
// versions__delta and apps__hashcode after the apps, then the end tag.
func AppendApplicationsFooterCompactXML(b []byte, versionsDelta, hashcode string) []byte {
	b = append(b, "<versions__delta>"...)
	b = appendXMLText(b, versionsDelta, false)
	b = append(b, "</versions__delta><apps__hashcode>"...)
	b = appendXMLText(b, hashcode, false)
	return append(b, "</apps__hashcode></applications>"...)
}

// AppendApplicationsCompactXML appends a compact applications document.
func AppendApplicationsCompactXML(b []byte, apps []registry.AppView, versionsDelta, hashcode string) []byte {
	b = slices.Grow(b, estimateAppsCompact(apps)*3/2+len(versionsDelta)+len(hashcode)+96)
	b = append(b, ApplicationsHeaderCompactXML...)
	for _, app := range apps {
		b = appendApplicationCompactXML(b, app)
	}
	return AppendApplicationsFooterCompactXML(b, versionsDelta, hashcode)
}

// AppendApplicationCompactXML appends one application in the compact form:
// <application><name>…</name><instance>…</instance>…</application>, both
// as an applications document's member and as a single application.
func AppendApplicationCompactXML(b []byte, app registry.AppView) []byte {
	b = slices.Grow(b, estimateAppCompact(app)*3/2)
	return appendApplicationCompactXML(b, app)
}

func appendApplicationCompactXML(b []byte, app registry.AppView) []byte {
	b = append(b, "<application><name>"...)
	b = appendXMLText(b, app.Name, false)
	b = append(b, "</name>"...)
	for _, iv := range app.Instances {
		if iv.Instance != nil {
			b = appendInstanceCompactXML(b, iv.Instance)
		}
	}
	return append(b, "</application>"...)
}

func appendInstanceCompactXML(b []byte, in *registry.Instance) []byte {
	b = append(b, "<instance>"...)
	if in.InstanceID != "" {
		b = appendElemXML(b, "instanceId", in.InstanceID)
	}
	b = appendElemXML(b, "app", in.App)
	b = appendElemXML(b, "ipAddr", in.IPAddr)
	b = appendOptionalXML(b, "vipAddress", in.VIPAddress)
	b = appendOptionalXML(b, "secureVipAddress", in.SecureVIPAddress)
	if dc := in.DataCenterInfo; dc.Name != "" {
		b = append(b, `<dataCenterInfo class="`...)
		b = appendXMLText(b, dataCenterClass(dc), true)
		b = append(b, `"><name>`...)
		b = appendXMLText(b, dc.Name, false)
		b = append(b, "</name>"...)
		if dc.Name == dataCenterAmazon {
			b = append(b, "<metadata>"...)
			for _, kv := range dc.Metadata {
				if compactAmazonKey(kv.Key) {
					b = appendElemXML(b, kv.Key, kv.Value) // each kept key is an XML name
				}
			}
			b = append(b, "</metadata>"...)
		}
		b = append(b, "</dataCenterInfo>"...)
	}
	b = appendElemXML(b, "hostName", in.HostName)
	b = append(b, "<status>"...)
	b = appendXMLText(b, statusName(in.Status), false)
	b = append(b, "</status><lastUpdatedTimestamp>"...)
	b = strconv.AppendInt(b, in.LastUpdatedTimestamp, 10)
	b = append(b, "</lastUpdatedTimestamp>"...)
	b = appendOptionalXML(b, "actionType", string(in.ActionType))
	b = appendOptionalXML(b, "asgName", in.ASGName)
	b = appendPortXML(b, "port", in.Port)
	b = appendPortXML(b, "securePort", in.SecurePort)
	return append(b, "</instance>"...)
}

// estimateAppsCompact and estimateAppCompact guess the compact JSON size of
// apps, a little over (XML is about 1.5× that), as estimateApps does.
func estimateAppsCompact(apps []registry.AppView) int {
	n := 0
	for _, app := range apps {
		n += estimateAppCompact(app)
	}
	return n
}

func estimateAppCompact(app registry.AppView) int {
	n := 2*len(app.Name) + 40
	for _, iv := range app.Instances {
		in := iv.Instance
		if in == nil {
			continue
		}
		n += 300 + len(in.InstanceID) + len(in.HostName) + len(in.App) + len(in.IPAddr) +
			len(in.VIPAddress) + len(in.SecureVIPAddress) + len(in.ASGName)
		if in.DataCenterInfo.Name == dataCenterAmazon {
			for _, kv := range in.DataCenterInfo.Metadata {
				n += 6 + len(kv.Key) + len(kv.Value)
			}
		}
	}
	return n
}
