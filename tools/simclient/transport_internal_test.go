package simclient

import (
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAcceptable(t *testing.T) {
	codes := []int{200, 204, 302, 400, 403, 404, 409, 500, 503}
	want := map[op][]bool{
		//             200   204   302   400    403    404    409    500    503
		opRegister:   {true, true, true, false, false, true, false, false, false},
		opRenew:      {true, true, true, false, false, true, false, false, false},
		opCancel:     {true, true, true, true, true, true, true, true, true},
		opFetchFull:  {true, true, true, false, false, false, false, false, false},
		opFetchDelta: {true, true, true, false, true, true, false, false, false},
	}
	for o, row := range want {
		for i, code := range codes {
			if got := acceptable(o, code); got != row[i] {
				t.Errorf("acceptable(%s, %d) = %v, want %v", o, code, got, row[i])
			}
		}
	}
}

func TestOp_maxAttempts(t *testing.T) {
	tests := []struct {
		o          op
		servers    int
		want       int
		whyComment string
	}{
		{opRenew, 3, 2, "heartbeat: retried once"},
		{opRenew, 1, 1, "nowhere else to go"},
		{opRegister, 5, 3, "RetryableEurekaHttpClient's 3"},
		{opFetchFull, 2, 2, "each server once"},
		{opCancel, 3, 3, ""},
	}
	for _, tt := range tests {
		if got := tt.o.maxAttempts(tt.servers); got != tt.want {
			t.Errorf("%s.maxAttempts(%d) = %d, want %d (%s)", tt.o, tt.servers, got, tt.want, tt.whyComment)
		}
	}
}

func TestFleet_send_headersAndGzip(t *testing.T) {
	var got http.Header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write([]byte(`{"applications":{"versions__delta":"1","apps__hashcode":"","application":[]}}`))
		zw.Close()
	}))
	t.Cleanup(ts.Close)
	f := mustNewFleet(t, testConfig(t, []Server{{"a", ts.URL + "/eureka/"}}))
	rep, err := f.send(t.Context(), opFetchFull, http.MethodGet, ts.URL+"/eureka/apps/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Get("Accept") != "application/json" || got.Get("Accept-Encoding") != "gzip" {
		t.Errorf("request headers = %v, want Accept application/json and Accept-Encoding gzip", got)
	}
	doc, err := decodeApplications(rep)
	if err != nil {
		t.Fatalf("decoding the inflated body: %v", err)
	}
	if doc.VersionsDelta != "1" || len(doc.Apps) != 0 {
		t.Errorf("decoded %+v", doc)
	}
}
