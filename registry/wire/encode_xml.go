package wire

import (
	"slices"
	"strconv"

	"github.com/muster-registry/muster/registry"
)

// The XML encoders write what Eureka's XStream converters write
// (Converters.java), without the pretty-printer's indentation and without an
// XML declaration, neither of which any client needs.

// AppendApplicationsXML appends an applications document:
// <applications><versions__delta>…</versions__delta><apps__hashcode>…
// </apps__hashcode><application>…</application>…</applications>.
func AppendApplicationsXML(b []byte, apps []registry.AppView, versionsDelta, hashcode string) []byte {
	b = slices.Grow(b, estimateApps(apps, true)+len(versionsDelta)+len(hashcode)+96)
	b = AppendApplicationsHeaderXML(b, versionsDelta, hashcode)
	for _, app := range apps {
		b = appendApplicationXML(b, app)
	}
	return append(b, ApplicationsFooterXML...)
}

// An applications document is, byte for byte, its header, its apps
// (AppendApplicationXML) and the footer: the pieces an incremental encoder
// caches per app and joins.

// AppendApplicationsHeaderXML appends the start of an applications
// document, up to the first <application>.
func AppendApplicationsHeaderXML(b []byte, versionsDelta, hashcode string) []byte {
	b = append(b, "<applications><versions__delta>"...)
	b = appendXMLText(b, versionsDelta, false)
	b = append(b, "</versions__delta><apps__hashcode>"...)
	b = appendXMLText(b, hashcode, false)
	return append(b, "</apps__hashcode>"...)
}

// ApplicationsFooterXML ends an applications document.
const ApplicationsFooterXML = "</applications>"

// AppendApplicationXML appends one application:
// <application><name>…</name><instance>…</instance>…</application>.
func AppendApplicationXML(b []byte, app registry.AppView) []byte {
	b = slices.Grow(b, estimateApp(app, true))
	return appendApplicationXML(b, app)
}

// AppendInstanceXML appends one instance: <instance>…</instance>.
func AppendInstanceXML(b []byte, iv registry.InstanceView) []byte {
	if iv.Instance == nil {
		return append(b, "<instance/>"...)
	}
	return appendInstanceXML(b, iv)
}

func appendApplicationXML(b []byte, app registry.AppView) []byte {
	b = append(b, "<application><name>"...)
	b = appendXMLText(b, app.Name, false)
	b = append(b, "</name>"...)
	for _, iv := range app.Instances {
		if iv.Instance != nil {
			b = appendInstanceXML(b, iv)
		}
	}
	return append(b, "</application>"...)
}

// appendInstanceXML follows Converters.InstanceInfoConverter#marshal: the
// JSON order, with the override element spelled overriddenstatus, ports as
// <port enabled="…">n</port> and the data center class as an attribute.
func appendInstanceXML(b []byte, iv registry.InstanceView) []byte {
	in := iv.Instance
	b = append(b, "<instance>"...)
	if in.InstanceID != "" {
		b = appendElemXML(b, "instanceId", in.InstanceID)
	}
	b = appendElemXML(b, "hostName", in.HostName)
	b = appendElemXML(b, "app", in.App)
	b = appendElemXML(b, "ipAddr", in.IPAddr)
	if sidVisible(in.Sid) {
		b = appendElemXML(b, "sid", in.Sid)
	}
	b = append(b, "<status>"...)
	b = appendXMLText(b, statusName(in.Status), false)
	b = append(b, "</status><overriddenstatus>"...)
	b = appendXMLText(b, statusName(in.OverriddenStatus), false)
	b = append(b, "</overriddenstatus>"...)

	b = appendPortXML(b, "port", in.Port)
	b = appendPortXML(b, "securePort", in.SecurePort)
	b = append(b, "<countryId>"...)
	b = strconv.AppendInt(b, int64(in.CountryID), 10)
	b = append(b, "</countryId>"...)

	if dc := in.DataCenterInfo; dc.Name != "" {
		b = append(b, `<dataCenterInfo class="`...)
		b = appendXMLText(b, dataCenterClass(dc), true)
		b = append(b, `"><name>`...)
		b = appendXMLText(b, dc.Name, false)
		b = append(b, "</name>"...)
		if dc.Name == dataCenterAmazon {
			b = appendMetadataXML(b, dc.Metadata)
		}
		b = append(b, "</dataCenterInfo>"...)
	}

	b = append(b, "<leaseInfo><renewalIntervalInSecs>"...)
	b = strconv.AppendInt(b, int64(orDefault(in.RenewalIntervalSecs, defaultRenewalIntervalSecs)), 10)
	b = append(b, "</renewalIntervalInSecs><durationInSecs>"...)
	b = strconv.AppendInt(b, int64(orDefault(in.LeaseDurationSecs, defaultLeaseDurationSecs)), 10)
	b = append(b, "</durationInSecs><registrationTimestamp>"...)
	b = strconv.AppendInt(b, in.RegistrationTimestamp, 10)
	b = append(b, "</registrationTimestamp><lastRenewalTimestamp>"...)
	b = strconv.AppendInt(b, iv.LastRenewalTimestamp, 10)
	b = append(b, "</lastRenewalTimestamp><evictionTimestamp>"...)
	b = strconv.AppendInt(b, in.EvictionTimestamp, 10)
	b = append(b, "</evictionTimestamp><serviceUpTimestamp>"...)
	b = strconv.AppendInt(b, in.ServiceUpTimestamp, 10)
	b = append(b, "</serviceUpTimestamp></leaseInfo>"...)

	b = appendMetadataXML(b, in.Metadata)

	b = appendOptionalXML(b, "appGroupName", in.AppGroupName)
	b = appendOptionalXML(b, "homePageUrl", in.HomePageURL)
	b = appendOptionalXML(b, "statusPageUrl", in.StatusPageURL)
	b = appendOptionalXML(b, "healthCheckUrl", in.HealthCheckURL)
	b = appendOptionalXML(b, "secureHealthCheckUrl", in.SecureHealthCheckURL)
	b = appendOptionalXML(b, "vipAddress", in.VIPAddress)
	b = appendOptionalXML(b, "secureVipAddress", in.SecureVIPAddress)
	if in.IsCoordinatingDiscoveryServer {
		b = append(b, "<isCoordinatingDiscoveryServer>true</isCoordinatingDiscoveryServer>"...)
	} else {
		b = append(b, "<isCoordinatingDiscoveryServer>false</isCoordinatingDiscoveryServer>"...)
	}
	b = append(b, "<lastUpdatedTimestamp>"...)
	b = strconv.AppendInt(b, in.LastUpdatedTimestamp, 10)
	b = append(b, "</lastUpdatedTimestamp><lastDirtyTimestamp>"...)
	b = strconv.AppendInt(b, in.LastDirtyTimestamp, 10)
	b = append(b, "</lastDirtyTimestamp>"...)
	b = appendOptionalXML(b, "actionType", string(in.ActionType))
	b = appendOptionalXML(b, "asgName", in.ASGName)
	return append(b, "</instance>"...)
}

func appendPortXML(b []byte, name string, p registry.Port) []byte {
	b = append(b, '<')
	b = append(b, name...)
	if p.Enabled {
		b = append(b, ` enabled="true">`...)
	} else {
		b = append(b, ` enabled="false">`...)
	}
	b = strconv.AppendInt(b, int64(p.Number), 10)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

// appendMetadataXML writes a metadata map, one element per entry, named by
// appendXMLName. An empty map carries the class attribute Eureka adds "for
// backward compat". An entry with an empty key has no XML name at all and
// is left out (XStream would write the broken tag "<>").
func appendMetadataXML(b []byte, md registry.Metadata) []byte {
	if len(md) == 0 {
		return append(b, `<metadata class="`+emptyMapClass+`"/>`...)
	}
	b = append(b, "<metadata>"...)
	for _, kv := range md {
		if kv.Key == "" {
			continue
		}
		b = append(b, '<')
		start := len(b)
		b = appendXMLName(b, kv.Key)
		end := len(b)
		b = append(b, '>')
		b = appendXMLText(b, kv.Value, false)
		b = append(b, '<', '/')
		b = append(b, b[start:end]...) // the coded name, copied from the start tag
		b = append(b, '>')
	}
	return append(b, "</metadata>"...)
}

func appendElemXML(b []byte, name, value string) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = appendXMLText(b, value, false)
	b = append(b, '<', '/')
	b = append(b, name...)
	return append(b, '>')
}

func appendOptionalXML(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	return appendElemXML(b, name, value)
}
