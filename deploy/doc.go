// Package deploy holds no code: its tests check the operator files beside
// it against a real node. grafana/muster-dashboard.json and
// prometheus/alerts.yml may use only metrics that /metrics exports (or the
// anti-entropy ones announced for issue 11), and the alert rules pass
// promtool's check and their unit tests (prometheus/alerts_test.yml). The
// Kubernetes manifests are checked by the nested module in kubernetes/.
package deploy
