package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// In-cluster defaults: where Kubernetes mounts a service account token and
// how the API server is announced to every pod.
const (
	serviceAccountDir   = "/var/run/secrets/kubernetes.io/serviceaccount"
	zoneLabel           = "topology.kubernetes.io/zone"
	legacyZoneLabel     = "failure-domain.beta.kubernetes.io/zone"
	maxNodeDocumentSize = 4 << 20
)

// labelValue is what Kubernetes allows in a label value, and so all a zone
// written into the properties file can be.
var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// k8sZoneCmd is the init container of deploy/kubernetes: the downward API
// cannot read node labels, so it asks the API server for the node the pod
// runs on (GET /api/v1/nodes/NAME, which RBAC must allow) and writes its
// zone label as cluster.zone into a properties file for serve --config.
// A node without the label gets a file without cluster.zone (the default
// zone) and a warning, so a single-zone test cluster still starts.
func k8sZoneCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("k8s-zone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	node := fs.String("node", os.Getenv("NODE_NAME"), "node name (default $NODE_NAME, from the downward API's spec.nodeName)")
	out := fs.String("out", "", "properties file to write (cluster.zone=...)")
	label := fs.String("label", zoneLabel, "node label holding the zone ("+legacyZoneLabel+" is tried too)")
	api := fs.String("api", inClusterAPI(), "API server URL (default from $KUBERNETES_SERVICE_HOST and _PORT)")
	tokenFile := fs.String("token-file", filepath.Join(serviceAccountDir, "token"), "bearer token of the service account")
	caFile := fs.String("ca-file", filepath.Join(serviceAccountDir, "ca.crt"), "CA bundle of the API server")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *node == "":
		return errors.New("k8s-zone: no node name: set NODE_NAME from the downward API (fieldPath: spec.nodeName) or pass --node")
	case *out == "":
		return errors.New("k8s-zone: --out is required")
	case *api == "":
		return errors.New("k8s-zone: not in a cluster ($KUBERNETES_SERVICE_HOST is unset) and no --api")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	labels, err := nodeLabels(ctx, *api, *node, *tokenFile, *caFile)
	if err != nil {
		return fmt.Errorf("k8s-zone: %w", err)
	}
	zone := labels[*label]
	if zone == "" {
		zone = labels[legacyZoneLabel]
	}
	content := "# written by muster k8s-zone from node " + *node + "\n"
	switch {
	case zone == "":
		fmt.Fprintf(stderr, "muster k8s-zone: node %s has no %s label: the node keeps the default zone\n", *node, *label)
	case !labelValue.MatchString(zone):
		return fmt.Errorf("k8s-zone: node %s: zone label %q is not a label value", *node, zone)
	default:
		content += "cluster.zone=" + zone + "\n"
		fmt.Fprintf(stdout, "node %s is in zone %s\n", *node, zone)
	}
	return os.WriteFile(*out, []byte(content), 0o644)
}

func inClusterAPI() string {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return ""
	}
	return "https://" + net.JoinHostPort(host, port)
}

// nodeLabels reads one node's labels from the API server.
func nodeLabels(ctx context.Context, api, node, tokenFile, caFile string) (map[string]string, error) {
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if strings.HasPrefix(api, "https://") {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("API server CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("API server CA %s: no PEM certificate", caFile)
		}
		tlsCfg.RootCAs = pool
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment}}
	u := strings.TrimRight(api, "/") + "/api/v1/nodes/" + url.PathEscape(node)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", node, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxNodeDocumentSize))
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", node, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("get node %s: %d: the service account may not read nodes (deploy/kubernetes/rbac.yaml grants get on nodes): %.200s",
			node, resp.StatusCode, body)
	default:
		return nil, fmt.Errorf("get node %s: %d: %.200s", node, resp.StatusCode, body)
	}
	var doc struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("get node %s: %w", node, err)
	}
	return doc.Metadata.Labels, nil
}
