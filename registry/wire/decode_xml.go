package wire

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
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

// xmlReader walks a document with encoding/xml's tokenizer, which checks
// well-formedness and knows only XML's predefined entities (so no entity
// expansion attacks). Elements the decoders do not know are skipped.
type xmlReader struct {
	d *xml.Decoder
}

func newXMLReader(data []byte) *xmlReader {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	return &xmlReader{d: d}
}

// token returns the next token; the end of input is an error here, since
// it is only read through end.
func (x *xmlReader) token() (xml.Token, error) {
	t, err := x.d.Token()
	if err != nil {
		return nil, xmlSyntaxError(err)
	}
	return t, nil
}

func xmlSyntaxError(err error) error {
	var se *xml.SyntaxError
	switch {
	case errors.As(err, &se):
		msg := se.Msg
		if msg == "unexpected EOF" {
			msg = "unexpected end of input"
		}
		return newSyntaxError("invalid XML on line " + strconv.Itoa(se.Line) + ": " + msg)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return newSyntaxError("invalid XML: unexpected end of input")
	}
	return newSyntaxError("invalid XML: " + err.Error())
}

// root reads up to the root element's start tag; a prolog (declaration,
// doctype, comments) may come before it.
func (x *xmlReader) root() (xml.StartElement, error) {
	for {
		t, err := x.d.Token()
		if errors.Is(err, io.EOF) {
			return xml.StartElement{}, malformed("", "empty body")
		}
		if err != nil {
			return xml.StartElement{}, xmlSyntaxError(err)
		}
		switch t := t.(type) {
		case xml.StartElement:
			return t, nil
		case xml.CharData:
			if !isBlank(string(t)) {
				return xml.StartElement{}, newSyntaxError("invalid XML: text before the root element")
			}
		}
	}
}

// end checks that nothing but white space, comments and processing
// instructions follows the root element.
func (x *xmlReader) end() error {
	for {
		t, err := x.d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return xmlSyntaxError(err)
		}
		switch t := t.(type) {
		case xml.StartElement:
			return newSyntaxError("invalid XML: a second root element <" + t.Name.Local + ">")
		case xml.CharData:
			if !isBlank(string(t)) {
				return newSyntaxError("invalid XML: text after the root element")
			}
		}
	}
}

// children reads the current element's content up to its end tag, calling
// child for each child element; child must consume the element. Text
// between children is ignored. Errors get the child's name in their path.
func (x *xmlReader) children(child func(se xml.StartElement) error) error {
	for {
		t, err := x.token()
		if err != nil {
			return err
		}
		switch t := t.(type) {
		case xml.StartElement:
			if err := child(t); err != nil {
				return addPath(err, t.Name.Local)
			}
		case xml.EndElement:
			return nil
		}
	}
}

// skip skips the rest of the current element.
func (x *xmlReader) skip() error {
	if err := x.d.Skip(); err != nil {
		return xmlSyntaxError(err)
	}
	return nil
}

// text reads the current element's text up to its end tag. An element
// inside it is an error: Eureka's fields are text only.
func (x *xmlReader) text() (string, error) {
	var s string
	var buf []byte
	for {
		t, err := x.token()
		if err != nil {
			return "", err
		}
		switch t := t.(type) {
		case xml.CharData:
			switch {
			case buf != nil:
				buf = append(buf, t...)
			case s == "":
				s = string(t)
			default:
				buf = append([]byte(s), t...)
			}
		case xml.StartElement:
			return "", fieldError("want text, got element <%s>", t.Name.Local)
		case xml.EndElement:
			if buf != nil {
				return string(buf), nil
			}
			return s, nil
		}
	}
}

func (x *xmlReader) setText(dst *string) error {
	s, err := x.text()
	if err == nil {
		*dst = s
	}
	return err
}

// intText reads a number element; empty text counts as absent.
func (x *xmlReader) intText(bits int) (int64, bool, error) {
	s, err := x.text()
	if err != nil || isBlank(s) {
		return 0, false, err
	}
	n, ok := parseInt(s, bits)
	if !ok {
		return 0, false, fieldError("want a number, got %s", quoteValue(s))
	}
	return n, true, nil
}

func (x *xmlReader) setInt32(dst *int) error {
	n, ok, err := x.intText(32)
	if ok {
		*dst = int(n)
	}
	return err
}

func (x *xmlReader) setInt64(dst *int64) error {
	n, ok, err := x.intText(64)
	if ok {
		*dst = n
	}
	return err
}

// instance reads an instance element's content (Converters.
// InstanceInfoConverter#unmarshal) and returns it with its
// leaseInfo.lastRenewalTimestamp.
func (x *xmlReader) instance() (*registry.Instance, int64, error) {
	in := newInstance()
	var lastRenewal int64
	var md metadataBuilder
	idGiven := false // <instanceId> present, even as <instanceId/>
	err := x.children(func(se xml.StartElement) error {
		switch se.Name.Local {
		case "instanceId":
			idGiven = true
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
	finishInstance(in, idGiven)
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
