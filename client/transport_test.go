package client_test

import (
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestClient_Fetch_jsonGzipAndXML asks for JSON with gzip accepted,
// inflates a gzipped answer, and still reads a server that answers XML.
func TestClient_Fetch_jsonGzipAndXML(t *testing.T) {
	checkGoroutines(t)
	var mu sync.Mutex
	var headers []http.Header
	xml := false
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Clone())
		asXML := xml
		mu.Unlock()
		if asXML {
			w.Header().Set("Content-Type", "application/xml")
			_, _ = w.Write([]byte(`<applications><versions__delta>1</versions__delta><apps__hashcode>UP_1_</apps__hashcode>` +
				`<application><name>ORDERS</name><instance><instanceId>o-1</instanceId><hostName>h</hostName><app>ORDERS</app>` +
				`<ipAddr>10.0.0.1</ipAddr><status>UP</status><port enabled="true">8080</port>` +
				`<dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"><name>MyOwn</name></dataCenterInfo>` +
				`</instance></application></applications>`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write([]byte(`{"applications":{"versions__delta":"1","apps__hashcode":"UP_1_","application":[{"name":"ORDERS",` +
			`"instance":[{"instanceId":"o-1","hostName":"h","app":"ORDERS","ipAddr":"10.0.0.1","status":"UP",` +
			`"port":{"$":8080,"@enabled":"true"},"metadata":{"zone":"z1"},` +
			`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}}]}]}}`))
		_ = zw.Close()
	}))
	t.Cleanup(ts.Close)
	c, _ := newClient(t, servers(ts.URL+"/eureka/"))
	apps, err := c.Fetch(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := apps["ORDERS"]; len(got) != 1 || got[0].ID != "o-1" || got[0].Port != 8080 || got[0].Zone != "z1" {
		t.Fatalf("from gzipped JSON: %+v", apps)
	}
	h := headers[0]
	if h.Get("Accept") != "application/json" || h.Get("Accept-Encoding") != "gzip" {
		t.Fatalf("request headers %v, want Accept application/json and Accept-Encoding gzip", h)
	}

	mu.Lock()
	xml = true
	mu.Unlock()
	c2, _ := newClient(t, servers(ts.URL+"/eureka/"))
	apps, err = c2.Fetch(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := apps["ORDERS"]; len(got) != 1 || got[0].ID != "o-1" || got[0].Port != 8080 {
		t.Fatalf("from XML: %+v", apps)
	}
}
