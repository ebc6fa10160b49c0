package wire

import (
	"strings"

	"github.com/muster-registry/muster/registry"
)

// compactStrings copies every string of in into one new allocation. The
// decoders slice strings out of their input, so without this a stored
// instance would keep its whole request body alive (~1 KB more than it
// needs), and an instance copied from a peer's full registry would keep
// that entire document alive.
func compactStrings(in *registry.Instance) {
	total := 0
	eachString(in, func(s *string) { total += len(*s) })
	if total == 0 {
		return
	}
	var b strings.Builder
	b.Grow(total)
	eachString(in, func(s *string) { b.WriteString(*s) })
	all := b.String()
	off := 0
	eachString(in, func(s *string) {
		n := len(*s)
		*s = all[off : off+n]
		off += n
	})
}

// eachString visits the instance's strings that come from the input; the
// data center class and name, which are almost always one of a few
// constants, are pointed at those constants instead.
func eachString(in *registry.Instance, f func(*string)) {
	for _, s := range []*string{
		&in.InstanceID, &in.HostName, &in.App, &in.IPAddr, &in.Sid,
		&in.AppGroupName, &in.HomePageURL, &in.StatusPageURL, &in.HealthCheckURL,
		&in.SecureHealthCheckURL, &in.VIPAddress, &in.SecureVIPAddress, &in.ASGName,
	} {
		f(s)
	}
	for i := range in.Metadata {
		f(&in.Metadata[i].Key)
		f(&in.Metadata[i].Value)
	}
	dc := &in.DataCenterInfo
	for i := range dc.Metadata {
		f(&dc.Metadata[i].Key)
		f(&dc.Metadata[i].Value)
	}
	switch dc.Class {
	case registry.DataCenterClassDefault:
		dc.Class = registry.DataCenterClassDefault
	case registry.DataCenterClassAmazon:
		dc.Class = registry.DataCenterClassAmazon
	default:
		f(&dc.Class)
	}
	switch dc.Name {
	case "MyOwn":
		dc.Name = "MyOwn"
	case "Amazon":
		dc.Name = "Amazon"
	case "Netflix":
		dc.Name = "Netflix"
	default:
		f(&dc.Name)
	}
}
