package javaeureka

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// The client-side scenarios that lived here (eviction, a node restarted
// without a data dir, failover, basic auth, TLS, shutdown) run on real
// artifacts from Maven Central in interop/spring now; what is left are the
// helpers the mixed, migration and DNS tests share.

// muster runs the muster binary with args (its tls subcommands, say).
func muster(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(musterBinary(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("muster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// nodeStatus is the part of /admin/status the tests read.
type nodeStatus struct {
	SelfPreservation struct {
		Enabled bool `json:"enabled"`
		Active  bool `json:"active"`
	} `json:"selfPreservation"`
	Registry struct {
		Instances int    `json:"instances"`
		Evictions uint64 `json:"evictions"`
	} `json:"registry"`
	Peers []struct {
		URL         string `json:"url"`
		State       string `json:"state"`
		AntiEntropy string `json:"antiEntropy"`
		LastError   string `json:"lastError"`
	} `json:"peers"`
}

func adminStatus(t *testing.T, n *musterNode) nodeStatus {
	t.Helper()
	resp, err := n.http.Get(n.base() + "/admin/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st nodeStatus
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/admin/status: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("/admin/status: %v", err)
	}
	return st
}
