package wire

import (
	"github.com/muster-registry/muster/registry"
)

// DecodeInstanceJSON decodes a register body, {"instance":{…}}. Like
// Eureka, it refuses a body without the instance wrapper. The result does
// not refer to data, so the caller may reuse it.
func DecodeInstanceJSON(data []byte) (*registry.Instance, error) {
	r := newJSONReader(data)
	var in *registry.Instance
	err := r.root(func(key string) error {
		if key != "instance" {
			return r.skip()
		}
		if err := r.wantObject(key); err != nil {
			return err
		}
		var err error
		in, _, err = r.instance()
		return err
	})
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, malformed("", `missing the "instance" wrapper (want {"instance":{…}})`)
	}
	return in, nil
}

// DecodeInstanceBodyJSON decodes an instance object without the wrapper, as
// a peer's replication batch carries it in instanceInfo. The result does
// not refer to data.
func DecodeInstanceBodyJSON(data []byte) (*registry.Instance, error) {
	r := newJSONReader(data)
	if err := r.rootKind(); err != nil {
		return nil, err
	}
	in, _, err := r.instance()
	if err != nil {
		return nil, err
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return in, nil
}

// DecodeApplicationsJSON decodes an applications document,
// {"applications":{…}}. It also takes a single application,
// {"application":{…}}, as GET /apps/{APP} returns it, as a document with
// that one app. The result does not refer to data, but all its strings
// share one copy of it.
func DecodeApplicationsJSON(data []byte) (*Applications, error) {
	r := newJSONReader(data)
	var apps *Applications
	err := r.root(func(key string) error {
		switch key {
		case "applications":
			if err := r.wantObject(key); err != nil {
				return err
			}
			var err error
			apps, err = r.applications()
			return err
		case "application":
			if err := r.wantObject(key); err != nil {
				return err
			}
			app, err := r.application()
			if err != nil {
				return err
			}
			apps = &Applications{Apps: []registry.AppView{app}}
			return nil
		}
		return r.skip()
	})
	if err != nil {
		return nil, err
	}
	if apps == nil {
		return nil, malformed("", `missing the "applications" wrapper (want {"applications":{…}})`)
	}
	return apps, nil
}

// instance reads an instance object with the cursor on '{' and returns it
// with its leaseInfo.lastRenewalTimestamp. The field set and the leniency
// follow Eureka's InstanceInfoDeserializer; see doc.go.
func (r *jsonReader) instance() (*registry.Instance, int64, error) {
	d := newInstanceDoc()
	if err := r.fields(instanceTable, &d); err != nil {
		return nil, 0, err
	}
	in, lastRenewal := d.finish()
	return in, lastRenewal, nil
}

// fields reads an object of tab's fields into d; null is an object without
// fields. Strings, numbers and booleans are taken leniently (stringValue,
// intValue, boolText) and a null value leaves the field as it is.
func (r *jsonReader) fields(tab fieldTable, d *instanceDoc) error {
	switch k := r.kind(); k {
	case kindNull:
		return r.literal("null")
	case kindObject:
	case kindInvalid:
		return r.unexpected()
	default:
		return fieldError("want an object, got %s", k)
	}
	return r.object(func(key string) error {
		switch k, dst := tab.field(d, key); k {
		case fieldText:
			s, ok, err := r.stringValue()
			if ok {
				d.setString(dst, s)
			}
			return err
		case fieldStatus, fieldActionType:
			s, ok, err := r.stringValue()
			if ok {
				setText(k, dst, s)
			}
			return err
		case fieldBool:
			s, ok, err := r.boolText()
			if ok {
				setText(k, dst, s)
			}
			return err
		case fieldInt32, fieldInt64:
			n, ok, err := r.intValue(fieldBits(k))
			if ok {
				setInt(k, dst, n)
			}
			return err
		case fieldPort, fieldSecurePort:
			return r.port(dst.(*registry.Port), k == fieldSecurePort)
		case fieldDataCenter:
			return r.dataCenter(dst.(*registry.DataCenterInfo))
		case fieldMetadata:
			return r.metadata(dst.(*metadataBuilder))
		case fieldLeaseInfo:
			return r.fields(leaseTable, d)
		}
		return r.skip()
	}, true)
}

// port reads {"$":8080,"@enabled":"true"} (number or numeric string, flag
// as string or boolean), or a bare 8080 or "8080". A flag that is not sent
// keeps the default: insecure port on, secure port off.
func (r *jsonReader) port(p *registry.Port, secure bool) error {
	if r.kind() != kindObject {
		n, ok, err := r.intValue(32)
		if ok {
			p.Number = int(n)
		}
		return err
	}
	return r.object(func(key string) error {
		switch key {
		case "$":
			return r.setInt32(&p.Number)
		case "@enabled":
			s, ok, err := r.boolText()
			if ok {
				if secure {
					p.Enabled = securePortEnabled(s)
				} else {
					p.Enabled = insecurePortEnabled(s)
				}
			}
			return err
		}
		return r.skip()
	}, true)
}

// dataCenter reads {"@class":…,"name":…,"metadata":{…}}. Metadata is kept
// for Amazon only, as Eureka keeps it (other data center types have none).
func (r *jsonReader) dataCenter(dc *registry.DataCenterInfo) error {
	switch k := r.kind(); k {
	case kindNull:
		return r.literal("null")
	case kindObject:
	case kindInvalid:
		return r.unexpected()
	default:
		return fieldError("want an object, got %s", k)
	}
	var class, name string
	var md metadataBuilder
	err := r.object(func(key string) error {
		switch key {
		case "@class":
			return r.setString(&class)
		case "name":
			return r.setString(&name)
		case "metadata":
			return r.metadata(&md)
		}
		return r.skip()
	}, true)
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

// metadata reads a string map. The "@class" marker of an empty map is
// dropped, numbers and booleans become their text, nulls are skipped.
func (r *jsonReader) metadata(md *metadataBuilder) error {
	switch k := r.kind(); k {
	case kindNull:
		return r.literal("null")
	case kindObject:
	case kindInvalid:
		return r.unexpected()
	default:
		return fieldError("want an object, got %s", k)
	}
	return r.object(func(key string) error {
		if key == "@class" {
			return r.skip()
		}
		k, s, err := r.scalar()
		switch {
		case err != nil:
			return err
		case k == kindObject || k == kindArray:
			return fieldError("want a string, got %s", k)
		case k != kindNull:
			*md = append(*md, registry.KV{Key: key, Value: s})
		}
		return nil
	}, true)
}

// applications reads the body of an applications document.
func (r *jsonReader) applications() (*Applications, error) {
	apps := &Applications{}
	err := r.object(func(key string) error {
		switch key {
		case "versions__delta":
			return r.setString(&apps.VersionsDelta)
		case "apps__hashcode":
			return r.setString(&apps.Hashcode)
		case "application":
			return r.oneOrMany(func() error {
				app, err := r.application()
				if err == nil {
					apps.Apps = append(apps.Apps, app)
				}
				return err
			})
		}
		return r.skip()
	}, true)
	if err != nil {
		return nil, err
	}
	return apps, nil
}

// application reads {"name":…,"instance":[…]} with the cursor on '{'.
func (r *jsonReader) application() (registry.AppView, error) {
	var app registry.AppView
	err := r.object(func(key string) error {
		switch key {
		case "name":
			return r.setString(&app.Name)
		case "instance":
			return r.oneOrMany(func() error {
				in, lastRenewal, err := r.instance()
				if err == nil {
					app.Instances = append(app.Instances, registry.InstanceView{Instance: in, LastRenewalTimestamp: lastRenewal})
				}
				return err
			})
		}
		return r.skip()
	}, true)
	return app, err
}
