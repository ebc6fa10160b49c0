package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry/wire"
	"github.com/muster-registry/muster/tools/simclient"
)

// bench drives the compose project: docker-compose (or docker compose),
// docker exec, kill, network disconnect. Nodes are observed from inside
// their containers (docker exec … /muster health --url …), which works
// even while a node is cut off from the network.
type bench struct {
	compose []string // the compose command and its fixed arguments
	project string
	out     *logger

	// mu guards cut.
	mu sync.Mutex
	// cut lists the nodes disconnected from the network: they are asked
	// from inside their container; the others through their published port,
	// which is much faster than docker exec.
	cut map[string]bool
}

// publishedPorts are the host ports docker-compose.yml gives the nodes.
var publishedPorts = map[string]string{"node-a": "8761", "node-b": "8762", "node-c": "8763"}

func newBench(project string, files []string, out *logger) (*bench, error) {
	var base []string
	if err := exec.Command("docker", "compose", "version").Run(); err == nil {
		base = []string{"docker", "compose"}
	} else if _, err := exec.LookPath("docker-compose"); err == nil {
		base = []string{"docker-compose"}
	} else {
		return nil, fmt.Errorf("neither `docker compose` nor `docker-compose` is available")
	}
	args := append(base, "-p", project)
	for _, f := range files {
		args = append(args, "-f", f)
	}
	return &bench{compose: args, project: project, out: out, cut: map[string]bool{}}, nil
}

func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

func (b *bench) composeRun(ctx context.Context, args ...string) error {
	all := append(append([]string{}, b.compose[1:]...), args...)
	_, err := run(ctx, b.compose[0], all...)
	return err
}

// container returns the container id of a service.
func (b *bench) container(ctx context.Context, service string) (string, error) {
	all := append(append([]string{}, b.compose[1:]...), "ps", "-q", service)
	out, err := run(ctx, b.compose[0], all...)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(out))
	if id == "" {
		return "", fmt.Errorf("service %s has no container", service)
	}
	return strings.Fields(id)[0], nil
}

// get fetches a URL of a service (nodeBase+"/…", http://127.0.0.1:9100/…): through the
// published port when the service has one and is on the network, else
// from inside its container.
func (b *bench) get(ctx context.Context, service, url string) ([]byte, error) {
	b.mu.Lock()
	cut := b.cut[service]
	b.mu.Unlock()
	if port, ok := publishedPorts[service]; ok && !cut {
		return hostGet(ctx, strings.Replace(url, "127.0.0.1:8761", "127.0.0.1:"+port, 1))
	}
	url = withCredentials(url)
	id, err := b.container(ctx, service)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := run(cctx, "docker", "exec", id, "/muster", "health", "--timeout", "3s", "--url", url)
	if err != nil {
		// run's error quotes the command line, credentials included.
		err = errors.New(strings.ReplaceAll(err.Error(), adminPassword, "xxxxx"))
	}
	return out, err
}

// hostGet fetches a node URL as the operator, with an Accept header if
// one is given; an answer other than 200 is an error.
func hostGet(ctx context.Context, url string, accept ...string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if len(accept) > 0 {
		req.Header.Set("Accept", accept[0])
	}
	authorize(req)
	resp, err := clients.Load().host.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return body, nil
}

func (b *bench) nodeStatus(ctx context.Context, node string) (ops.AdminStatus, error) {
	var st ops.AdminStatus
	body, err := b.get(ctx, node, nodeBase+"/admin/status")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(body, &st)
}

func (b *bench) ready(ctx context.Context, node string) bool {
	_, err := b.get(ctx, node, nodeBase+"/readyz")
	return err == nil
}

// view is a node's registry: instance id → status, and its hashcode.
type view struct {
	instances map[string]string
	hashcode  string
}

func (b *bench) nodeView(ctx context.Context, node string) (view, error) {
	body, err := b.get(ctx, node, nodeBase+"/eureka/apps")
	if err != nil {
		return view{}, err
	}
	apps, err := wire.DecodeApplicationsXML(body)
	if err != nil {
		return view{}, err
	}
	v := view{instances: map[string]string{}, hashcode: apps.Hashcode}
	for _, app := range apps.Apps {
		for _, iv := range app.Instances {
			v.instances[app.Name+"/"+iv.ID()] = string(iv.Status)
		}
	}
	return v, nil
}

func (v view) equal(o view) bool {
	if v.hashcode != o.hashcode || len(v.instances) != len(o.instances) {
		return false
	}
	for k, s := range v.instances {
		if o.instances[k] != s {
			return false
		}
	}
	return true
}

// fleet counts the instances that are not the nodes' own.
func (v view) fleet() int { return len(v.instances) - v.self() }

// self counts the nodes' own instances (app selfApp).
func (v view) self() int {
	n := 0
	for k := range v.instances {
		if isSelf(k) {
			n++
		}
	}
	return n
}

// isSelf says whether an "APP/id" key is one of the nodes' own instances.
func isSelf(key string) bool { return strings.HasPrefix(key, selfApp+"/") }

// fleetStatus is a node's /admin/status and how many fleet instances it
// holds (/admin/status counts the nodes' own instances too).
func (b *bench) fleetStatus(ctx context.Context, node string) (ops.AdminStatus, int, error) {
	st, err := b.nodeStatus(ctx, node)
	if err != nil {
		return st, 0, err
	}
	v, err := b.nodeView(ctx, node)
	if err != nil {
		return st, 0, err
	}
	return st, v.fleet(), nil
}

func (v view) countPrefix(prefix string) int {
	n := 0
	for k := range v.instances {
		if _, id, _ := strings.Cut(k, "/"); strings.HasPrefix(id, prefix) {
			n++
		}
	}
	return n
}

// deletedAt returns, for the instances whose id starts with prefix, when
// the node removed them: the lastUpdatedTimestamp of their DELETED entries
// in the node's delta.
func (b *bench) deletedAt(ctx context.Context, node, prefix string) (map[string]time.Time, error) {
	body, err := b.get(ctx, node, nodeBase+"/eureka/apps/delta")
	if err != nil {
		return nil, err
	}
	apps, err := wire.DecodeApplicationsXML(body)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, app := range apps.Apps {
		for _, iv := range app.Instances {
			if iv.ActionType == "DELETED" && strings.HasPrefix(iv.ID(), prefix) {
				out[iv.ID()] = time.UnixMilli(iv.LastUpdatedTimestamp)
			}
		}
	}
	return out, nil
}

// selfPreservationOnAt returns when the node logged that self-preservation
// turned on, the first time after since (its log lines carry milliseconds).
func (b *bench) selfPreservationOnAt(ctx context.Context, node string, since time.Time) (time.Time, error) {
	logs, err := b.logs(ctx, node)
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(logs, "\n") {
		var rec struct {
			Message string    `json:"message"`
			Time    time.Time `json:"time"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Message, "self-preservation active") {
			continue
		}
		if rec.Time.After(since) {
			return rec.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s never logged self-preservation turning on", node)
}

func (b *bench) dashboard(ctx context.Context, node string) (string, error) {
	body, err := b.get(ctx, node, nodeBase+"/")
	return string(body), err
}

func (b *bench) clientStats(ctx context.Context, service string) (simclient.Stats, error) {
	var st simclient.Stats
	body, err := b.get(ctx, service, "http://127.0.0.1:9100/stats")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(body, &st)
}

// network returns the name of the compose network a container is on.
func (b *bench) network(ctx context.Context, service string) (string, error) {
	id, err := b.container(ctx, service)
	if err != nil {
		return "", err
	}
	out, err := run(ctx, "docker", "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", id)
	if err != nil {
		return "", err
	}
	for _, n := range strings.Fields(string(out)) {
		if strings.HasSuffix(n, "_muster") {
			return n, nil
		}
	}
	return "", fmt.Errorf("%s is on no *_muster network (%s)", service, strings.TrimSpace(string(out)))
}

func (b *bench) disconnect(ctx context.Context, service string) (reconnect func() error, err error) {
	netName, err := b.network(ctx, service)
	if err != nil {
		return nil, err
	}
	id, err := b.container(ctx, service)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.cut[service] = true
	b.mu.Unlock()
	if _, err := run(ctx, "docker", "network", "disconnect", netName, id); err != nil {
		return nil, err
	}
	return func() error {
		// Compose gave the container its service name as a DNS alias; give
		// it back, or its peers cannot find it by name.
		_, err := run(context.Background(), "docker", "network", "connect", "--alias", service, netName, id)
		b.mu.Lock()
		b.cut[service] = false
		b.mu.Unlock()
		return err
	}, nil
}

func (b *bench) kill(ctx context.Context, services ...string) error {
	return b.composeRun(ctx, append([]string{"kill", "-s", "SIGKILL"}, services...)...)
}

// diedAt returns when a killed service's container stopped.
func (b *bench) diedAt(ctx context.Context, service string) (time.Time, error) {
	id, err := b.container(ctx, service)
	if err != nil {
		return time.Time{}, err
	}
	out, err := run(ctx, "docker", "inspect", "-f", "{{.State.FinishedAt}}", id)
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, strings.TrimSpace(string(out)))
}

func (b *bench) start(ctx context.Context, services ...string) error {
	return b.composeRun(ctx, append([]string{"start"}, services...)...)
}

func (b *bench) stop(ctx context.Context, services ...string) error {
	return b.composeRun(ctx, append([]string{"stop"}, services...)...)
}

func (b *bench) logs(ctx context.Context, service string) (string, error) {
	id, err := b.container(ctx, service)
	if err != nil {
		return "", err
	}
	out, err := run(ctx, "docker", "logs", id)
	return string(out), err
}
