package node

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// The limit settings reach the running node: the registry limits, the body
// deadline of the real http.Server, and the connection limit.
func TestNode_limitsWired(t *testing.T) {
	n := startTestNode(t, "limits", "zone-a", nil, "cluster.enabled=false",
		"muster.max-instances=2", "muster.body-read-timeout-ms=300", "muster.max-connections=50")
	waitOpened(t, n)
	base := "http://" + n.Addr() + "/eureka/apps/"
	for i, want := range []int{204, 204, 503} {
		if got := call(t, "POST", base+"ORDERS", instanceBody("ORDERS", fmt.Sprintf("o-%d", i), 90)); got != want {
			t.Fatalf("registration %d: %d, want %d", i, got, want)
		}
	}
	if got := call(t, "PUT", base+"ORDERS/o-0", ""); got != 200 {
		t.Fatalf("heartbeat at capacity: %d", got)
	}

	c, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /eureka/apps/ORDERS HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 408") {
		t.Fatalf("body that never comes: %q after %s, want 408", line, time.Since(start))
	}
	if v := metricValue(t, n, `muster_limit_rejections_total{limit="max-instances"}`); v != 1 {
		t.Errorf("max-instances rejections = %v, want 1", v)
	}
}
