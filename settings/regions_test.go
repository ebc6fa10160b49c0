package settings

import (
	"strings"
	"testing"
)

// The DNS TXT region follows eureka.client.region unless set apart; the
// remote regions' URLs and whitelist load from Spring's names and the
// environment, and a bad URL's error hides its password. (Moved from
// node/.)
func TestLoad_regionsAndDNSRegion(t *testing.T) {
	if s := mustLoad(t, "", nil, []string{"eureka.client.region=eu-west-1"}); s.DNS.Region != "eu-west-1" || s.Regions.LocalRegion != "eu-west-1" {
		t.Fatalf("dns region %q, local %q", s.DNS.Region, s.Regions.LocalRegion)
	}
	if s := mustLoad(t, "", nil, []string{"eureka.client.region=eu-west-1", "muster.dns.region=x"}); s.DNS.Region != "x" {
		t.Fatalf("dns region %q", s.DNS.Region)
	}
	s := mustLoad(t, "", []string{"EUREKA_SERVER_REMOTEREGIONURLSWITHNAME_B=http://h/eureka"},
		[]string{"eureka.server.remote-region-urls-with-name=c;http://u:pw@h2/eureka", "eureka.server.remoteRegionAppWhitelist.global=orders"})
	if len(s.Regions.URLs["b"]) != 1 || s.Regions.URLs["c"][0] != "http://u:pw@h2/eureka" || s.Regions.Whitelist["global"][0] != "orders" {
		t.Fatalf("regions %+v", s.Regions)
	}
	if _, _, err := LoadSettings("", nil, []string{"eureka.server.remote-region-urls-with-name.b=ftp://u:secret@h"}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("bad remote URL: %v", err)
	}
}
