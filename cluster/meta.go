package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
)

// nodeMeta is what each node gossips about itself as memberlist node
// metadata (at most memberlist.MetaMaxSize = 512 bytes), as compact JSON:
//
//	{"zone":"us-east-1a","url":"http://10.0.0.5:8761/eureka/"}
//
// Shutdown re-advertises it with "leaving":true just before memberlist's
// leave broadcast, so peers can tell a node that left from one that died
// (see eventDelegate.NotifyLeave). Unknown keys are ignored when decoding,
// so fields can be added later.
type nodeMeta struct {
	Zone    string `json:"zone"`
	URL     string `json:"url"`
	Leaving bool   `json:"leaving,omitempty"`
}

func encodeMeta(m nodeMeta) ([]byte, error) {
	return json.Marshal(m)
}

func decodeMeta(b []byte) (nodeMeta, error) {
	var m nodeMeta
	if len(b) == 0 {
		return m, errors.New("no metadata (not a Muster node?)")
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nodeMeta{}, fmt.Errorf("metadata %q: %w", truncate(b, 64), err)
	}
	return m, nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
