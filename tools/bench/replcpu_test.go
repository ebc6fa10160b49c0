package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The bare receivers of the replcpu control read a peer's batch with the
// node's codec and answer every item 200, and refuse what is not a batch.
func TestBenchBareReceiver_answersEveryItem(t *testing.T) {
	srv, addr, err := benchStartBare(http.NewServeMux(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	bodies, err := benchHeartbeatBatches(30, 25)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body []byte) (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+addr+"/eureka/peerreplication/batch", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, want := range []int{25, 5, 25} { // a smaller batch between two larger ones
		code, answer := post(bodies[i%2])
		if got := strings.Count(answer, `"statusCode":200`); code != http.StatusOK || got != want {
			t.Fatalf("batch %d: %d with %d items answered 200, want 200 with %d: %.200s", i, code, got, want, answer)
		}
	}
	if code, _ := post([]byte(`{"nope":1}`)); code != http.StatusBadRequest {
		t.Fatalf("a body that is not a batch: %d, want 400", code)
	}
}
