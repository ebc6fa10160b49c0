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
	d := newInstanceDoc()
	if err := x.fields(instanceTable, &d); err != nil {
		return nil, 0, err
	}
	in, lastRenewal := d.finish()
	return in, lastRenewal, nil
}

// fields reads the current element's children as tab's fields into d.
// Every field is text (an element inside one is an error); an empty number
// leaves the field as it is.
func (x *xmlReader) fields(tab fieldTable, d *instanceDoc) error {
	return x.children(func(se xml.StartElement) error {
		switch k, dst := tab.field(d, se.Name.Local); k {
		case fieldText:
			s, err := x.text()
			if err == nil {
				d.setString(dst, s)
			}
			return err
		case fieldStatus, fieldActionType, fieldBool:
			s, err := x.text()
			if err == nil {
				setText(k, dst, s)
			}
			return err
		case fieldInt32, fieldInt64:
			n, ok, err := x.intText(fieldBits(k))
			if ok {
				setInt(k, dst, n)
			}
			return err
		case fieldPort, fieldSecurePort:
			return x.port(se, dst.(*registry.Port), k == fieldSecurePort)
		case fieldDataCenter:
			return x.dataCenter(se, dst.(*registry.DataCenterInfo))
		case fieldMetadata:
			return x.metadata(dst.(*metadataBuilder))
		case fieldLeaseInfo:
			return x.fields(leaseTable, d)
		}
		return x.skip()
	})
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
