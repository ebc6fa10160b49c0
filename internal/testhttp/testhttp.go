// Package testhttp is the one HTTP client of the HTTP layer's tests
// (httpapi and its parts): a request to a handler served on loopback, read
// as the test wants to see it, with nothing the transport would hide.
package testhttp

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Response is an answer as a test reads it: the body whole, decompressed
// when it came gzipped.
type Response struct {
	Code   int
	Header http.Header
	Body   string
}

// Reason is an error answer's reason: the X-Muster-Error header on the
// Eureka client routes (their error bodies are empty, as the Java
// server's), else the body.
func (r Response) Reason() string {
	if v := r.Header.Get("X-Muster-Error"); v != "" {
		return v
	}
	return r.Body
}

// Do sends method base+path with body; headers alternate name, value. It
// leaves gzip to the test (a transport that adds Accept-Encoding itself
// would hide what the server does), and redirects too, and opens a
// connection of its own each time. A request that fails, or a body that
// does not read or decompress, fails tb.
func Do(tb testing.TB, base, method, path, body string, headers ...string) Response {
	tb.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			tb.Fatalf("%s %s: bad gzip: %v", method, path, err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			tb.Fatal(err)
		}
	}
	return Response{resp.StatusCode, resp.Header, string(b)}
}

// SpringBody is a register body (POST /eureka/apps/ORDERS) as Spring
// Cloud's client sends it: instance host-a:orders:8080 of ORDERS.
const SpringBody = `{"instance":{
 "instanceId":"host-a:orders:8080","hostName":"host-a","app":"ORDERS","ipAddr":"10.0.0.12",
 "status":"UP","overriddenStatus":"UNKNOWN",
 "port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,
 "dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
 "leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},
 "metadata":{"management.port":"8080"},
 "homePageUrl":"http://host-a:8080/","statusPageUrl":"http://host-a:8080/actuator/info",
 "healthCheckUrl":"http://host-a:8080/actuator/health","vipAddress":"orders","secureVipAddress":"orders",
 "isCoordinatingDiscoveryServer":false,"lastUpdatedTimestamp":1718000000000,"lastDirtyTimestamp":1717999999000}}`

// JSONHeaders are the headers of a JSON request that wants JSON back.
func JSONHeaders() []string {
	return []string{"Content-Type", "application/json", "Accept", "application/json"}
}

// Browser sends requests as a browser does for the console's tests: it
// keeps the session cookie the server sets and sends it back, with Headers
// (name, value pairs: credentials, say) on every request.
type Browser struct {
	TB      testing.TB
	Base    string
	Headers []string
	// Cookie is the session cookie as "name=value" ("": none yet).
	Cookie string
}

func (b *Browser) do(method, path, body string, extra ...string) Response {
	b.TB.Helper()
	h := append(append([]string{}, b.Headers...), extra...)
	if b.Cookie != "" {
		h = append(h, "Cookie", b.Cookie)
	}
	r := Do(b.TB, b.Base, method, path, body, h...)
	if sc := r.Header.Get("Set-Cookie"); sc != "" {
		b.Cookie, _, _ = strings.Cut(sc, ";")
	}
	return r
}

// Get is GET path.
func (b *Browser) Get(path string) Response {
	b.TB.Helper()
	return b.do(http.MethodGet, path, "")
}

// PostForm posts form to path, with the extra headers.
func (b *Browser) PostForm(path string, form url.Values, extra ...string) Response {
	b.TB.Helper()
	return b.do(http.MethodPost, path, form.Encode(), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, extra...)...)
}

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// ConsoleCSRF opens the console's confirmation page of action on app/id
// and returns the CSRF token its form carries; no page or no token fails
// the test.
func (b *Browser) ConsoleCSRF(action, app, id string) string {
	b.TB.Helper()
	r := b.Get("/console/confirm?action=" + url.QueryEscape(action) + "&app=" + url.QueryEscape(app) + "&id=" + url.QueryEscape(id))
	m := consoleCSRF.FindStringSubmatch(r.Body)
	if r.Code != http.StatusOK || m == nil {
		b.TB.Fatalf("confirm page: %d %s", r.Code, r.Body)
	}
	return m[1]
}
