package wire

import (
	"encoding/xml"
	"strconv"

	"github.com/muster-registry/muster/registry"
)

// DecodeInstanceXML decodes an XML register body, <instance>…</instance>.
func DecodeInstanceXML(data []byte) (*registry.Instance, error) {
	x := newXMLReader(data)
	root, err := x.root()
	if err != nil {
		return nil, err
	}
	if root.Name.Local != "instance" {
		return nil, malformed("", "root element <%s>, want <instance>", root.Name.Local)
	}
	in, _, err := x.instance()
	if err != nil {
		return nil, err
	}
	if err := x.end(); err != nil {
		return nil, err
	}
	return in, nil
}

// DecodeApplicationsXML decodes an applications document,
// <applications>…</applications>, or a single <application>, as GET
// /apps/{APP} returns it, as a document with that one app.
func DecodeApplicationsXML(data []byte) (*Applications, error) {
	x := newXMLReader(data)
	root, err := x.root()
	if err != nil {
		return nil, err
	}
	var apps *Applications
	switch root.Name.Local {
	case "applications":
		apps, err = x.applications()
	case "application":
		var app registry.AppView
		app, err = x.application()
		apps = &Applications{Apps: []registry.AppView{app}}
	default:
		return nil, malformed("", "root element <%s>, want <applications>", root.Name.Local)
	}
	if err != nil {
		return nil, err
	}
	if err := x.end(); err != nil {
		return nil, err
	}
	return apps, nil
}

// instance reads an instance element's content (Converters.
// InstanceInfoConverter#unmarshal) and returns it with its
// leaseInfo.lastRenewalTimestamp.
func (x *xmlReader) instance() (*registry.Instance, int64, error) {
	in := newInstance()
	var lastRenewal int64
	var md metadataBuilder
	err := x.children(func(se xml.StartElement) error {
		switch se.Name.Local {
		case "instanceId":
			return x.setText(&in.InstanceID)
		case "hostName":
			return x.setText(&in.HostName)
		case "app":
			return x.setText(&in.App)
		case "ipAddr":
			return x.setText(&in.IPAddr)
		case "sid":
			return x.setText(&in.Sid)
		case "status":
			s, err := x.text()
			in.Status = parseStatus(s)
			return err
		case "overriddenstatus", "overriddenStatus":
			s, err := x.text()
			in.OverriddenStatus = parseStatus(s)
			return err
		case "port":
			return x.port(se, &in.Port, false)
		case "securePort":
			return x.port(se, &in.SecurePort, true)
		case "countryId":
			return x.setInt32(&in.CountryID)
		case "dataCenterInfo":
			return x.dataCenter(se, &in.DataCenterInfo)
		case "leaseInfo":
			return x.leaseInfo(in, &lastRenewal)
		case "metadata":
			return x.metadata(&md)
		case "appGroupName":
			return x.setText(&in.AppGroupName)
		case "homePageUrl":
			return x.setText(&in.HomePageURL)
		case "statusPageUrl":
			return x.setText(&in.StatusPageURL)
		case "healthCheckUrl":
			return x.setText(&in.HealthCheckURL)
		case "secureHealthCheckUrl":
			return x.setText(&in.SecureHealthCheckURL)
		case "vipAddress":
			return x.setText(&in.VIPAddress)
		case "secureVipAddress":
			return x.setText(&in.SecureVIPAddress)
		case "asgName":
			return x.setText(&in.ASGName)
		case "isCoordinatingDiscoveryServer":
			s, err := x.text()
			in.IsCoordinatingDiscoveryServer = parseBool(s)
			return err
		case "lastUpdatedTimestamp":
			return x.setInt64(&in.LastUpdatedTimestamp)
		case "lastDirtyTimestamp":
			return x.setInt64(&in.LastDirtyTimestamp)
		case "actionType":
			s, err := x.text()
			in.ActionType = parseActionType(s)
			return err
		}
		return x.skip()
	})
	if err != nil {
		return nil, 0, err
	}
	in.Metadata = md.finish()
	finishInstance(in)
	return in, lastRenewal, nil
}

// port reads <port enabled="true">8080</port>. Without the attribute the
// default stays: insecure port on, secure port off.
func (x *xmlReader) port(se xml.StartElement, p *registry.Port, secure bool) error {
	for _, a := range se.Attr {
		if a.Name.Local == "enabled" {
			if secure {
				p.Enabled = securePortEnabled(a.Value)
			} else {
				p.Enabled = insecurePortEnabled(a.Value)
			}
		}
	}
	return x.setInt32(&p.Number)
}

// dataCenter reads <dataCenterInfo class="…"><name>…</name><metadata>…
// </metadata></dataCenterInfo>; metadata is kept for Amazon only.
func (x *xmlReader) dataCenter(se xml.StartElement, dc *registry.DataCenterInfo) error {
	var class, name string
	for _, a := range se.Attr {
		if a.Name.Local == "class" {
			class = a.Value
		}
	}
	var md metadataBuilder
	err := x.children(func(se xml.StartElement) error {
		switch se.Name.Local {
		case "name":
			return x.setText(&name)
		case "metadata":
			return x.metadata(&md)
		}
		return x.skip()
	})
	if err != nil {
		return err
	}
	canonical, ok := canonicalDataCenterName(name)
	if !ok {
		return &decodeError{path: "name", reason: "unknown data center " + quoteValue(name) + " (want MyOwn, Netflix or Amazon)"}
	}
	*dc = registry.DataCenterInfo{Class: class, Name: canonical}
	if canonical == dataCenterAmazon {
		dc.Metadata = md.finish()
	}
	return nil
}

func (x *xmlReader) leaseInfo(in *registry.Instance, lastRenewal *int64) error {
	return x.children(func(se xml.StartElement) error {
		switch se.Name.Local {
		case "renewalIntervalInSecs":
			return x.setInt32(&in.RenewalIntervalSecs)
		case "durationInSecs":
			return x.setInt32(&in.LeaseDurationSecs)
		case "registrationTimestamp":
			return x.setInt64(&in.RegistrationTimestamp)
		case "lastRenewalTimestamp", "renewalTimestamp":
			return x.setInt64(lastRenewal)
		case "evictionTimestamp":
			return x.setInt64(&in.EvictionTimestamp)
		case "serviceUpTimestamp":
			return x.setInt64(&in.ServiceUpTimestamp)
		}
		return x.skip()
	})
}

// metadata reads one element per entry; the element name, decoded with
// decodeXMLName, is the key.
func (x *xmlReader) metadata(md *metadataBuilder) error {
	return x.children(func(se xml.StartElement) error {
		name := se.Name.Local
		if se.Name.Space != "" {
			// encoding/xml splits "a:b" into a namespace and a local name;
			// XStream sees one name.
			name = se.Name.Space + ":" + name
		}
		v, err := x.text()
		if err == nil {
			*md = append(*md, registry.KV{Key: decodeXMLName(name), Value: v})
		}
		return err
	})
}

func (x *xmlReader) applications() (*Applications, error) {
	apps := &Applications{}
	n := 0
	err := x.children(func(se xml.StartElement) error {
		switch se.Name.Local {
		case "versions__delta":
			return x.setText(&apps.VersionsDelta)
		case "apps__hashcode":
			return x.setText(&apps.Hashcode)
		case "application":
			app, err := x.application()
			if err != nil {
				return addPath(err, "["+strconv.Itoa(n)+"]")
			}
			n++
			apps.Apps = append(apps.Apps, app)
			return nil
		}
		return x.skip()
	})
	if err != nil {
		return nil, err
	}
	return apps, nil
}

func (x *xmlReader) application() (registry.AppView, error) {
	var app registry.AppView
	err := x.children(func(se xml.StartElement) error {
		switch se.Name.Local {
		case "name":
			return x.setText(&app.Name)
		case "instance":
			in, lastRenewal, err := x.instance()
			if err != nil {
				return addPath(err, "["+strconv.Itoa(len(app.Instances))+"]")
			}
			app.Instances = append(app.Instances, registry.InstanceView{Instance: in, LastRenewalTimestamp: lastRenewal})
			return nil
		}
		return x.skip()
	})
	return app, err
}
