package eureka

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
)

// readRoutes are the Eureka reads a client makes, each answering a
// registry document or an instance; ORDERS/host-a:orders:8080 is springBody.
var readRoutes = []string{
	"/eureka/apps/", "/eureka/apps/delta", "/eureka/apps/ORDERS",
	"/eureka/apps/ORDERS/host-a:orders:8080", "/eureka/instances/host-a:orders:8080",
	"/eureka/vips/orders", "/eureka/svips/orders", "/eureka/v2/apps/", "/v2/apps/delta",
}

// Rule: an answer is gzipped only when the request named gzip in
// Accept-Encoding with a weight above zero (Spring's WebClient does not
// decompress what it did not ask for).
func TestRule_gzipOnlyWhenAsked(t *testing.T) {
	n := newTestNode(t)
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
		t.Fatalf("register: %d", r.code)
	}
	for _, tt := range []struct {
		acceptEncoding string
		gzip           bool
	}{
		{"", false},
		{"identity", false},
		{"deflate", false},
		{"*", false},
		{"gzip;q=0", false},
		{"gzip; q=0.0, deflate", false},
		{"br, zstd", false},
		{"gzip", true},
		{"gzip, deflate", true},
		{"deflate, gzip;q=0.5", true},
		{"GZIP", true},
		{"x-gzip", true},
	} {
		for _, route := range readRoutes {
			var h []string
			if tt.acceptEncoding != "" {
				h = []string{"Accept-Encoding", tt.acceptEncoding}
			}
			for _, accept := range []string{"", "application/json"} {
				hh := h
				if accept != "" {
					hh = append(append([]string{}, h...), "Accept", accept)
				}
				r := n.do(t, "GET", route, "", hh...)
				if r.code != 200 {
					t.Fatalf("GET %s: %d", route, r.code)
				}
				got := r.header.Get("Content-Encoding") == "gzip"
				// Only the registry documents are compressed at all; the
				// rule is that nothing is compressed unasked.
				if got && !tt.gzip {
					t.Errorf("GET %s with Accept-Encoding %q (Accept %q) answered gzip", route, tt.acceptEncoding, accept)
				}
				if tt.gzip && !got && (route == "/eureka/apps/" || route == "/eureka/apps/delta") {
					t.Errorf("GET %s with Accept-Encoding %q answered uncompressed", route, tt.acceptEncoding)
				}
			}
		}
	}
}

// Rule: JSON whenever Accept contains "json", XML when there is no Accept
// (py-eureka-client sends none and reads XML) or it names neither.
func TestRule_formatFollowsAccept(t *testing.T) {
	n := newTestNode(t)
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
		t.Fatalf("register: %d", r.code)
	}
	for _, tt := range []struct {
		accept string
		json   bool
	}{
		{"", false},
		{"*/*", false},
		{"application/xml", false},
		{"text/xml", false},
		{"text/html", false},
		{"application/json", true},
		{"application/json;charset=UTF-8", true},
		{"application/json, application/*+json", true},    // Spring RestTemplate/RestClient
		{"application/json, text/plain, */*", true},       // eureka-js-client via request
		{"application/xml;q=0.9, application/json", true}, // json anywhere wins
		{"application/x-json", true},
	} {
		routes := append(append([]string{}, readRoutes...), "/eureka/status")
		for _, route := range routes {
			var h []string
			if tt.accept != "" {
				h = []string{"Accept", tt.accept}
			}
			r := n.do(t, "GET", route, "", h...)
			ct := r.header.Get("Content-Type")
			isJSON := strings.HasPrefix(ct, "application/json") && strings.HasPrefix(strings.TrimSpace(r.body), "{")
			isXML := strings.HasPrefix(ct, "application/xml") && strings.HasPrefix(strings.TrimSpace(r.body), "<")
			if r.code != 200 || (tt.json && !isJSON) || (!tt.json && !isXML) {
				t.Errorf("GET %s Accept %q: %d %q %.40q, want %s", route, tt.accept, r.code, ct, r.body,
					map[bool]string{true: "JSON", false: "XML"}[tt.json])
			}
		}
	}
}

// Rule: a heartbeat is accepted in every shape clients send it, and
// answers 200 with an empty body (a Spring client counts only 200;
// eureka-js-client sends no query string; Jersey 3 sends a {} body).
func TestRule_heartbeatShapes(t *testing.T) {
	for _, tt := range []struct {
		name, query, body string
		headers           []string
	}{
		{"no query string (eureka-js-client)", "", "", nil},
		{"only lastDirtyTimestamp", "?lastDirtyTimestamp=1717999999000", "", nil},
		{"status and lastDirtyTimestamp (Java, py-eureka-client)", "?status=UP&lastDirtyTimestamp=1717999999000", "", nil},
		{"empty JSON body (Jersey 3)", "?status=UP&lastDirtyTimestamp=1717999999000", "{}", []string{"Content-Type", "application/json"}},
		{"empty JSON body, no query", "", "{}", []string{"Content-Type", "application/json", "Accept", "application/json"}},
		{"XML body", "", "<instance/>", []string{"Content-Type", "application/xml"}},
		{"empty lastDirtyTimestamp", "?status=UP&lastDirtyTimestamp=", "", nil},
		{"lastDirtyTimestamp null", "?lastDirtyTimestamp=null", "", nil},
		{"status in another case", "?status=up", "", nil},
		{"overriddenstatus UNKNOWN", "?status=UP&overriddenstatus=UNKNOWN", "", nil},
		{"Accept JSON (Spring)", "?status=UP&lastDirtyTimestamp=1717999999000", "", []string{"Accept", "application/json"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
				t.Fatalf("register: %d", r.code)
			}
			renewals := n.reg.Stats().Renewals
			r := n.do(t, "PUT", "/eureka/apps/ORDERS/host-a:orders:8080"+tt.query, tt.body, tt.headers...)
			if r.code != 200 || r.body != "" {
				t.Fatalf("heartbeat %s: %d %q (%s), want an empty 200", tt.query, r.code, r.body, r.reason())
			}
			if n.reg.Stats().Renewals != renewals+1 {
				t.Errorf("heartbeat answered 200 but renewed nothing")
			}
		})
	}
}

// Rule: a heartbeat Muster refuses answers 404, never 400 (WebClient reads
// a 400 as success and would never register again) and never 5xx; the
// client registers again, and nothing changes.
func TestRule_heartbeatRefusalIs404(t *testing.T) {
	for _, tt := range []struct {
		name, path string
		renews     bool // the Java server renews, then asks for the newer data
	}{
		{"unknown instance", "/eureka/apps/ORDERS/nobody?status=UP&lastDirtyTimestamp=1", false},
		{"unknown app", "/eureka/apps/NOAPP/host-a:orders:8080", false},
		{"non-numeric lastDirtyTimestamp", "/eureka/apps/ORDERS/host-a:orders:8080?status=UP&lastDirtyTimestamp=yesterday", false},
		{"negative lastDirtyTimestamp", "/eureka/apps/ORDERS/host-a:orders:8080?lastDirtyTimestamp=-5", false},
		{"unknown overriddenstatus", "/eureka/apps/ORDERS/host-a:orders:8080?overriddenstatus=MAYBE", false},
		{"client data newer than ours", "/eureka/apps/ORDERS/host-a:orders:8080?status=UP&lastDirtyTimestamp=99999999999999", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
				t.Fatalf("register: %d", r.code)
			}
			before := n.reg.Snapshot()
			renewals := n.reg.Stats().Renewals
			for _, accept := range []string{"", "application/json"} {
				var h []string
				if accept != "" {
					h = []string{"Accept", accept}
				}
				r := n.do(t, "PUT", tt.path, "", h...)
				if r.code != 404 || r.body != "" || r.reason() == "" {
					t.Fatalf("PUT %s (Accept %q): %d %q reason %q, want an empty 404 with a reason", tt.path, accept, r.code, r.body, r.reason())
				}
			}
			after := n.reg.Snapshot()
			if after.Version != before.Version || (!tt.renews && n.reg.Stats().Renewals != renewals) {
				t.Errorf("a refused heartbeat changed the registry (version %d→%d) or renewed a lease (%d→%d)",
					before.Version, after.Version, renewals, n.reg.Stats().Renewals)
			}
		})
	}
}

// Rule: the writes clients make answer what the clients test for: 204 on
// register (the Java client), 200 on heartbeat, cancel (eureka-js-client
// checks for 200), status, override removal and metadata.
func TestRule_writeStatusCodes(t *testing.T) {
	n := newTestNode(t)
	id := "/eureka/apps/ORDERS/host-a:orders:8080"
	for _, tt := range []struct {
		method, path, body string
		headers            []string
		want               int
	}{
		{"POST", "/eureka/apps/ORDERS", springBody, jsonHeaders(), 204},
		{"PUT", id, "", nil, 200},
		{"PUT", id + "/status?value=OUT_OF_SERVICE&lastDirtyTimestamp=1717999999000", "{}", []string{"Content-Type", "application/json"}, 200},
		{"DELETE", id + "/status?lastDirtyTimestamp=1717999999000", "", nil, 200},
		{"POST", "/eureka/apps/ORDERS", springBody, jsonHeaders(), 204},
		{"PUT", id + "/metadata?zone=a", "", nil, 200},
		{"DELETE", id, "", nil, 200},
	} {
		r := n.do(t, tt.method, tt.path, tt.body, tt.headers...)
		if r.code != tt.want {
			t.Errorf("%s %s: %d (%s), want %d", tt.method, tt.path, r.code, r.reason(), tt.want)
		}
	}
}

// Rule: whatever a client registers, every other client can still read
// every registry document. Each body below is something a real client
// sends, or a mistake one can make; the server normalises it (status case,
// unknown or missing dataCenterInfo @class, foreign fields, JSON nulls,
// both spellings of overriddenStatus, strings for numbers and booleans) so
// that the JSON stays readable by a strict reader (Spring's Jackson mapper
// fails a whole fetch on an unknown field, a single object where it wants
// an array, a status it does not know, a missing @class, a numeric
// apps__hashcode), and the XML stays well formed for py-eureka-client.
func TestRule_nothingRegisteredBreaksAFetch(t *testing.T) {
	const id = `"instanceId":"odd-1","hostName":"odd-host","app":"ODD","ipAddr":"127.0.0.9"`
	const dc = `"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}`
	for _, tt := range []struct{ name, ct, body string }{
		{"py-eureka-client body", "application/json", `{"instance":{` + id + `,"status":"UP","overriddenstatus":"UNKNOWN",
			"port":{"$":9000,"@enabled":"true"},"securePort":{"$":9443,"@enabled":"false"},"countryId":1,` + dc + `,
			"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":0,"lastRenewalTimestamp":0,"evictionTimestamp":0,"serviceUpTimestamp":0},
			"metadata":{"management.port":"9000"},"homePageUrl":"http://odd-host:9000/","statusPageUrl":"http://odd-host:9000/info",
			"healthCheckUrl":"http://odd-host:9000/health","secureHealthCheckUrl":"","vipAddress":"odd","secureVipAddress":"odd",
			"isCoordinatingDiscoveryServer":"false","lastUpdatedTimestamp":"1717999999000","lastDirtyTimestamp":"1717999999000"}}`},
		{"eureka-js-client body (real booleans)", "application/json", `{"instance":{` + id + `,"status":"UP",
			"port":{"$":9000,"@enabled":true},"vipAddress":"odd",` + dc + `,"registrationTime":123}}`},
		{"status in lower case", "application/json", `{"instance":{` + id + `,"status":"up","overriddenStatus":"out_of_service",` + dc + `}}`},
		{"status nobody knows", "application/json", `{"instance":{` + id + `,"status":"SLEEPY","overriddenStatus":"MAYBE",` + dc + `}}`},
		{"both override spellings", "application/json", `{"instance":{` + id + `,"overriddenStatus":null,"overriddenstatus":"DOWN",` + dc + `}}`},
		{"unknown @class", "application/json", `{"instance":{` + id + `,"dataCenterInfo":{"@class":"org.example.MyDataCenter","name":"MyOwn"}}}`},
		{"no @class", "application/json", `{"instance":{` + id + `,"dataCenterInfo":{"name":"MyOwn"}}}`},
		{"data center name in another case", "application/json", `{"instance":{` + id + `,"dataCenterInfo":{"@class":"x","name":"myown"}}}`},
		{"Amazon with odd metadata", "application/json", `{"instance":{` + id + `,"dataCenterInfo":{"@class":"com.netflix.appinfo.AmazonInfo","name":"Amazon",
			"metadata":{"instance-id":"i-1","availability-zone":"a","n":1,"b":true,"gone":null,"sp ace":"v"}}}}`},
		{"JSON nulls everywhere", "application/json", `{"instance":{` + id + `,"status":null,"overriddenStatus":null,"sid":null,"port":null,"securePort":null,
			"countryId":null,"leaseInfo":null,"metadata":null,"homePageUrl":null,"vipAddress":null,"asgName":null,"appGroupName":null,
			"isCoordinatingDiscoveryServer":null,"lastUpdatedTimestamp":null,"lastDirtyTimestamp":null,"actionType":null,` + dc + `}}`},
		{"foreign fields", "application/json", `{"instance":{` + id + `,` + dc + `,"fooBar":{"a":[1,{"b":null}]},"tags":["x","y"],"weight":3.5,"enabled":true,"@type":"x"}}`},
		{"numbers and booleans as strings", "application/json", `{"instance":{` + id + `,` + dc + `,"port":{"$":"9000","@enabled":"true"},"securePort":{"$":"9443","@enabled":false},
			"countryId":"1","leaseInfo":{"renewalIntervalInSecs":"5","durationInSecs":"15"},"isCoordinatingDiscoveryServer":true,
			"lastUpdatedTimestamp":1717999999000,"lastDirtyTimestamp":"1717999999000"}}`},
		{"port as a bare number", "application/json", `{"instance":{` + id + `,` + dc + `,"port":9000,"securePort":"9443"}}`},
		{"metadata scalars and odd keys", "application/json", `{"instance":{` + id + `,` + dc + `,"metadata":{"n":1,"f":1.5,"b":false,"z":null,
			"@class":"java.util.Collections$EmptyMap","sp ace":"v","1st":"v","a/b":"v","a:b":"v","x<y":"v","dollar$":"v","und_er":"v","ü":"v","":"e"}}}`},
		{"actionType from the client", "application/json", `{"instance":{` + id + `,` + dc + `,"actionType":"DELETED"}}`},
		{"no instanceId", "application/json", `{"instance":{"hostName":"odd-host","app":"ODD","ipAddr":"127.0.0.9",` + dc + `}}`},
		{"XML with foreign elements and lower-case status", "application/xml", `<instance><instanceId>odd-1</instanceId><hostName>odd-host</hostName>
			<app>ODD</app><ipAddr>127.0.0.9</ipAddr><status>starting</status><overriddenstatus>up</overriddenstatus>
			<dataCenterInfo class="org.example.X"><name>MyOwn</name></dataCenterInfo><port enabled="yes">9000</port>
			<metadata><a>1</a><x-y>2</x-y></metadata><weird><deep>1</deep></weird></instance>`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
				t.Fatalf("register spring body: %d", r.code)
			}
			r := n.do(t, "POST", "/eureka/apps/ODD", tt.body, "Content-Type", tt.ct)
			if r.code != 204 {
				t.Fatalf("register: %d (%s), want 204", r.code, r.reason())
			}
			routes := append(append([]string{}, readRoutes...), "/eureka/apps/ODD", "/eureka/vips/odd")
			for _, route := range routes {
				j := n.do(t, "GET", route, "", "Accept", "application/json")
				if j.code != 200 {
					t.Fatalf("GET %s: %d", route, j.code)
				}
				if err := strictJSON(j.body); err != nil {
					t.Errorf("GET %s JSON would fail a strict reader: %v\n%s", route, err, j.body)
				}
				x := n.do(t, "GET", route, "")
				if err := strictXML(x.body); err != nil {
					t.Errorf("GET %s XML would fail py-eureka-client: %v\n%s", route, err, x.body)
				}
			}
			// Its cancel, as the delta carries it (DELETED), and a
			// registry with nothing left.
			for _, cancel := range []string{"/eureka/apps/ODD/odd-1", "/eureka/apps/ODD/odd-host", "/eureka/apps/ORDERS/host-a:orders:8080"} {
				n.do(t, "DELETE", cancel, "")
			}
			for _, route := range []string{"/eureka/apps/delta", "/eureka/apps/", "/eureka/vips/odd"} {
				j := n.do(t, "GET", route, "", "Accept", "application/json")
				if err := strictJSON(j.body); err != nil {
					t.Errorf("GET %s JSON after the cancels would fail a strict reader: %v\n%s", route, err, j.body)
				}
				if x := n.do(t, "GET", route, ""); strictXML(x.body) != nil {
					t.Errorf("GET %s XML after the cancels: %v\n%s", route, strictXML(x.body), x.body)
				}
			}
			if j := n.do(t, "GET", "/eureka/apps/delta", "", "Accept", "application/json"); !strings.Contains(j.body, `"actionType":"DELETED"`) {
				t.Errorf("the delta carries no DELETED entry: %s", j.body)
			}
		})
	}
}

// Rule: the override a client or an operator sets, and its removal, read
// back as a status every client knows, and a client that heartbeats after
// the removal is asked to register again (the Java server's UNKNOWN rule).
func TestRule_overrideAndRemoval(t *testing.T) {
	n := newTestNode(t)
	id := "/eureka/apps/ORDERS/host-a:orders:8080"
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
		t.Fatalf("register: %d", r.code)
	}
	steps := []struct {
		method, path string
		want         int
		status       string
	}{
		{"PUT", id + "/status?value=out_of_service", 200, "OUT_OF_SERVICE"},
		{"PUT", id + "?status=UP&lastDirtyTimestamp=1717999999000", 200, "OUT_OF_SERVICE"},
		{"DELETE", id + "/status", 200, "UNKNOWN"},
		{"PUT", id + "?status=UP&lastDirtyTimestamp=1717999999000", 404, "UNKNOWN"},
	}
	for _, s := range steps {
		if r := n.do(t, s.method, s.path, ""); r.code != s.want {
			t.Fatalf("%s %s: %d (%s), want %d", s.method, s.path, r.code, r.reason(), s.want)
		}
		r := n.do(t, "GET", id, "", "Accept", "application/json")
		if err := strictJSON(r.body); err != nil {
			t.Fatalf("after %s %s: %v", s.method, s.path, err)
		}
		if !strings.Contains(r.body, `"status":"`+s.status+`"`) {
			t.Errorf("after %s %s: %s, want status %s", s.method, s.path, r.body, s.status)
		}
	}
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
		t.Fatalf("register again: %d", r.code)
	}
	if r := n.do(t, "GET", id, "", "Accept", "application/json"); !strings.Contains(r.body, `"status":"UP"`) {
		t.Errorf("registered again: %s, want UP", r.body)
	}
}

var (
	knownStatus  = map[string]bool{"UP": true, "DOWN": true, "STARTING": true, "OUT_OF_SERVICE": true, "UNKNOWN": true}
	knownAction  = map[string]bool{"ADDED": true, "MODIFIED": true, "DELETED": true}
	knownDCClass = map[string]string{
		"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo": "", "com.netflix.appinfo.MyDataCenterInfo": "",
		"com.netflix.appinfo.AmazonInfo": "Amazon",
	}
	knownDCName = map[string]bool{"MyOwn": true, "Amazon": true, "Netflix": true}
	digits      = regexp.MustCompile(`^[0-9]+$`)
	hashcode    = regexp.MustCompile(`^([A-Z_]+_[0-9]+_)*$`)
)

// strictJSON reads a Eureka JSON document as a strict reader would (a
// Jackson mapper that fails on unknown properties, with the Eureka codec's
// types): only known keys, arrays where arrays go, known enum values, the
// @class a type id needs, and the Eureka codec's string-typed fields as
// strings.
func strictJSON(body string) error {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the document")
	}
	if len(doc) != 1 {
		return fmt.Errorf("root has %d keys, want one wrapper", len(doc))
	}
	for k, v := range doc {
		switch k {
		case "applications":
			return checkApplications(v)
		case "application":
			return checkApplication(v)
		case "instance":
			return checkInstance(v)
		}
		return fmt.Errorf("unknown root %q", k)
	}
	return nil
}

func object(v any, what string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want an object, got %T", what, v)
	}
	return m, nil
}

func str(m map[string]any, k string) error {
	if _, ok := m[k].(string); !ok {
		return fmt.Errorf("%s: want a string, got %T", k, m[k])
	}
	return nil
}

func checkApplications(v any) error {
	m, err := object(v, "applications")
	if err != nil {
		return err
	}
	for k := range m {
		switch k {
		case "versions__delta", "apps__hashcode", "application":
		default:
			return fmt.Errorf("applications: unknown field %q", k)
		}
	}
	if err := str(m, "versions__delta"); err != nil {
		return err
	}
	if err := str(m, "apps__hashcode"); err != nil {
		return err
	}
	if h := m["apps__hashcode"].(string); !hashcode.MatchString(h) {
		return fmt.Errorf("apps__hashcode %q", h)
	}
	apps, ok := m["application"].([]any)
	if !ok {
		return fmt.Errorf("application: want an array, got %T", m["application"])
	}
	for _, a := range apps {
		if err := checkApplication(a); err != nil {
			return err
		}
	}
	return nil
}

func checkApplication(v any) error {
	m, err := object(v, "application")
	if err != nil {
		return err
	}
	for k := range m {
		if k != "name" && k != "instance" {
			return fmt.Errorf("application: unknown field %q", k)
		}
	}
	if err := str(m, "name"); err != nil {
		return err
	}
	list, ok := m["instance"].([]any)
	if !ok {
		return fmt.Errorf("application %v: instance: want an array, got %T", m["name"], m["instance"])
	}
	for _, in := range list {
		if err := checkInstance(in); err != nil {
			return err
		}
	}
	return nil
}

func checkInstance(v any) error {
	m, err := object(v, "instance")
	if err != nil {
		return err
	}
	for k, val := range m {
		if val == nil {
			return fmt.Errorf("instance: %s is null", k)
		}
		switch k {
		case "instanceId", "hostName", "app", "ipAddr", "sid", "appGroupName", "homePageUrl", "statusPageUrl",
			"healthCheckUrl", "secureHealthCheckUrl", "vipAddress", "secureVipAddress", "asgName":
			err = str(m, k)
		case "status", "overriddenStatus":
			if s, _ := val.(string); !knownStatus[s] {
				err = fmt.Errorf("%s %v is no InstanceStatus", k, val)
			}
		case "actionType":
			if s, _ := val.(string); !knownAction[s] {
				err = fmt.Errorf("actionType %v", val)
			}
		case "isCoordinatingDiscoveryServer":
			if s, _ := val.(string); s != "true" && s != "false" {
				err = fmt.Errorf("%s %v: want \"true\" or \"false\"", k, val)
			}
		case "lastUpdatedTimestamp", "lastDirtyTimestamp":
			if s, _ := val.(string); !digits.MatchString(s) {
				err = fmt.Errorf("%s %v: want a string of digits", k, val)
			}
		case "countryId":
			if _, ok := val.(json.Number); !ok {
				err = fmt.Errorf("countryId %v: want a number", val)
			}
		case "port", "securePort":
			err = checkPort(k, val)
		case "dataCenterInfo":
			err = checkDataCenter(val)
		case "leaseInfo":
			err = checkLease(val)
		case "metadata":
			err = checkMetadata("metadata", val, true)
		default:
			err = fmt.Errorf("instance: unknown field %q", k)
		}
		if err != nil {
			return fmt.Errorf("instance %v: %w", m["instanceId"], err)
		}
	}
	for _, k := range []string{"hostName", "app", "ipAddr", "status", "dataCenterInfo"} {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("instance %v: no %s", m["instanceId"], k)
		}
	}
	return nil
}

func checkPort(k string, v any) error {
	m, err := object(v, k)
	if err != nil {
		return err
	}
	if len(m) != 2 {
		return fmt.Errorf("%s: %v, want $ and @enabled", k, m)
	}
	if n, ok := m["$"].(json.Number); !ok || !digits.MatchString(n.String()) {
		return fmt.Errorf("%s.$ %v: want a whole number", k, m["$"])
	}
	if s, _ := m["@enabled"].(string); s != "true" && s != "false" {
		return fmt.Errorf("%s.@enabled %v", k, m["@enabled"])
	}
	return nil
}

func checkDataCenter(v any) error {
	m, err := object(v, "dataCenterInfo")
	if err != nil {
		return err
	}
	class, _ := m["@class"].(string)
	wantName, ok := knownDCClass[class]
	if !ok {
		return fmt.Errorf("dataCenterInfo.@class %v: no class a Java client resolves", m["@class"])
	}
	name, _ := m["name"].(string)
	if !knownDCName[name] || (wantName != "" && name != wantName) {
		return fmt.Errorf("dataCenterInfo.name %v with @class %s", m["name"], class)
	}
	for k, val := range m {
		switch k {
		case "@class", "name":
		case "metadata":
			if class != "com.netflix.appinfo.AmazonInfo" {
				return fmt.Errorf("dataCenterInfo.metadata on %s", class)
			}
			if err := checkMetadata("dataCenterInfo.metadata", val, false); err != nil {
				return err
			}
		default:
			return fmt.Errorf("dataCenterInfo: unknown field %q", k)
		}
	}
	return nil
}

func checkLease(v any) error {
	m, err := object(v, "leaseInfo")
	if err != nil {
		return err
	}
	for k, val := range m {
		switch k {
		case "renewalIntervalInSecs", "durationInSecs", "registrationTimestamp", "lastRenewalTimestamp",
			"evictionTimestamp", "serviceUpTimestamp":
			if n, ok := val.(json.Number); !ok || !digits.MatchString(n.String()) {
				return fmt.Errorf("leaseInfo.%s %v: want a whole number", k, val)
			}
		default:
			return fmt.Errorf("leaseInfo: unknown field %q", k)
		}
	}
	return nil
}

func checkMetadata(what string, v any, emptyClass bool) error {
	m, err := object(v, what)
	if err != nil {
		return err
	}
	for k, val := range m {
		if k == "@class" && emptyClass {
			if val != "java.util.Collections$EmptyMap" || len(m) != 1 {
				return fmt.Errorf("%s: @class %v beside %d keys", what, val, len(m)-1)
			}
			continue
		}
		if _, ok := val.(string); !ok {
			return fmt.Errorf("%s.%s: want a string, got %T", what, k, val)
		}
	}
	return nil
}

// strictXML checks that an XML answer is well formed and holds what
// py-eureka-client reads without a guard: a class attribute on every
// dataCenterInfo, digits in the timestamps and ports it converts with
// int(), and a status it knows.
func strictXML(body string) error {
	dec := xml.NewDecoder(bytes.NewReader([]byte(body)))
	var stack []string
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch el := tok.(type) {
		case xml.StartElement:
			stack = append(stack, el.Name.Local)
			text.Reset()
			if el.Name.Local == "dataCenterInfo" {
				ok := false
				for _, a := range el.Attr {
					ok = ok || (a.Name.Local == "class" && a.Value != "")
				}
				if !ok {
					return fmt.Errorf("dataCenterInfo without a class attribute")
				}
			}
		case xml.CharData:
			text.Write(el)
		case xml.EndElement:
			name := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			if parent != "instance" && !(parent == "leaseInfo") {
				continue
			}
			v := strings.TrimSpace(text.String())
			switch name {
			case "lastUpdatedTimestamp", "lastDirtyTimestamp", "countryId", "port", "securePort",
				"renewalIntervalInSecs", "durationInSecs", "registrationTimestamp", "lastRenewalTimestamp",
				"evictionTimestamp", "serviceUpTimestamp":
				if !digits.MatchString(v) {
					return fmt.Errorf("<%s>%s</%s> is not an integer", name, v, name)
				}
			case "status", "overriddenstatus":
				if !knownStatus[v] {
					return fmt.Errorf("<%s>%s</%s>", name, v, name)
				}
			}
		}
	}
	return nil
}

// The strict reader above must itself refuse what Spring's mapper refuses,
// or the rule test could not fail.
func TestStrictJSON_refusesWhatSpringRefuses(t *testing.T) {
	const in = `{"instanceId":"a","hostName":"h","app":"A","ipAddr":"1.2.3.4","status":"UP",` +
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}}`
	good := `{"applications":{"versions__delta":"1","apps__hashcode":"UP_1_","application":[{"name":"A","instance":[` + in + `]}]}}`
	if err := strictJSON(good); err != nil {
		t.Fatalf("a good document refused: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown field":         strings.Replace(good, `"app":"A"`, `"app":"A","fooBar":1`, 1),
		"single object":         strings.Replace(strings.Replace(good, `"instance":[`, `"instance":`, 1), `}]}]}}`, `}}]}}`, 1),
		"misspelled status":     strings.Replace(good, `"status":"UP"`, `"status":"up"`, 1),
		"missing @class":        strings.Replace(good, `"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo",`, ``, 1),
		"numeric apps_hashcode": strings.Replace(good, `"apps__hashcode":"UP_1_"`, `"apps__hashcode":1`, 1),
		"null":                  strings.Replace(good, `"ipAddr":"1.2.3.4"`, `"ipAddr":null`, 1),
		"metadata number":       strings.Replace(good, `"status":"UP"`, `"status":"UP","metadata":{"n":1}`, 1),
		"boolean not a string":  strings.Replace(good, `"status":"UP"`, `"status":"UP","isCoordinatingDiscoveryServer":false`, 1),
	} {
		if strictJSON(doc) == nil {
			t.Errorf("%s: accepted %s", name, doc)
		}
	}
	if strictXML(`<applications><application><instance><dataCenterInfo><name>MyOwn</name></dataCenterInfo></instance></application></applications>`) == nil {
		t.Errorf("XML without a dataCenterInfo class accepted")
	}
}
