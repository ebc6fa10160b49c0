package depcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/muster-registry/muster"

// rule says which project packages one package may import (paths relative
// to the module). imports bind its code; tests may also import testImports
// (and a package's external tests always import the package itself).
type rule struct {
	imports     []string
	testImports []string
	why         string
}

// allowed is every package of the module. A package missing from here, or
// listed here but not (or no longer) a package with Go files, fails the test.
var allowed = map[string]rule{
	// The core.
	"registry": {
		testImports: []string{"registry/registrytest"},
		why:         "the core imports no other project package (ARCHITECTURE.md)",
	},
	"registry/registrytest": {
		imports: []string{"registry"},
		why:     "fixtures for tests of the registry and its users",
	},
	"registry/wire": {
		imports: []string{"registry"},
		// proccontrol: the CPU of the GC benchmarks' collections.
		testImports: []string{"internal/proccontrol", "registry/registrytest"},
		why:         "Eureka's JSON and XML for registry types; used by httpapi, replication and clients",
	},
	"registry/persist": {
		imports:     []string{"registry", "registry/wire"},
		testImports: []string{"registry/registrytest"},
		why:         "the registry snapshot on disk (muster.data-dir), in Eureka JSON",
	},
	"cluster": {
		testImports: []string{"internal/testlog", "internal/testwait"},
		why:         "memberlist only; node turns members into replication peers (STYLE.md §1)",
	},
	"replication": {
		imports:     []string{"internal/redact", "registry", "registry/wire"},
		testImports: []string{"registry/registrytest", "replication/replicationtest"},
		why:         "never imports cluster; peers are handed to it",
	},
	"replication/replicationtest": {
		// wire: the anti-entropy bodies its Transport answers.
		imports:     []string{"registry", "registry/registrytest", "registry/wire", "replication"},
		testImports: []string{"internal/testlog", "registry/persist"}, // persist: restarts from data-dir snapshots
		why:         "in-memory Transport and the deterministic in-process cluster for tests",
	},
	"report": {
		why: "the plain types a node's parts report themselves in (health checks, xDS clients, remote regions); httpapi/ops re-exports them, so the parts need no HTTP package and ops links no part",
	},
	"auth": {
		why: "users, passwords and peer signatures for the edges (httpapi, node); a leaf, so the registry never sees a credential",
	},
	"drain": {
		imports:     []string{"registry"},
		testImports: []string{"registry/registrytest"},
		why:         "the drain with a receipt: the reader table every read notes, and the receipt asked of every node; the HTTP layer and the node wire it",
	},
	"httpapi": {
		imports:     []string{"auth", "drain", "httpapi/console", "httpapi/edge", "httpapi/eureka", "httpapi/httpkit", "httpapi/ops", "registry", "registry/wire", "replication"},
		testImports: []string{"internal/testlog", "internal/redact", "internal/testhttp", "internal/testwait", "registry/registrytest", "replication/replicationtest"},
		why:         "the HTTP server: mounts the Eureka API, the console and ops behind the edge, one lifecycle; knows nothing of cluster or cmd",
	},
	"httpapi/eureka": {
		// Never the console: the Eureka API and the dashboard are separate
		// audiences that share only the edge, httpkit and ops' types. Never
		// regions: two consumers of the registry; the API reads the remote
		// regions through its RemoteRegions, in registry/wire's CopyView.
		// Its external tests of remote regions (regions_test.go) give the
		// API a regions.Set fetching other instances of the API, as a node
		// does: the one arrow to regions, in tests only.
		imports:     []string{"drain", "httpapi/edge", "httpapi/httpkit", "httpapi/ops", "internal/gzjoin", "registry", "registry/wire", "replication"},
		testImports: []string{"internal/testhttp", "internal/testwait", "regions", "regions/regionstest", "registry/registrytest", "replication/replicationtest"}, // the API alone; the assembled server is httpapi's
		why:         "Eureka's REST API: handlers, payloads assembled from per-app pieces, blocking fetches and the watch stream, the peer endpoints",
	},
	"httpapi/console": {
		// Never the Eureka API (httpapi): the console reads the registry
		// through its own interface and acts through Apply.
		imports:     []string{"auth", "httpapi/httpkit", "httpapi/ops", "registry"},
		testImports: []string{"internal/testhttp", "registry/registrytest"}, // the console alone; the assembled server is httpapi's
		why:         "the operator's dashboard: pages, actions, chart history, assets",
	},
	"httpapi/edge": {
		imports: []string{"auth", "httpapi/httpkit", "replication"},
		why:     "what every request meets before a handler: authentication and authorisation, connection and body limits",
	},
	"httpapi/httpkit": {
		imports: []string{"auth", "registry"},
		why:     "helpers the HTTP layer's parts share (the user on a request, gzip when asked, 400s, path parameters)",
	},
	"httpapi/ops": {
		imports: []string{"drain", "registry", "replication", "report"},
		// Its tests drive the endpoints through the server that mounts them.
		testImports: []string{"auth", "httpapi", "internal/testwait", "registry/registrytest"},
		why:         "the operator endpoints: /admin/status types the CLI and the chaos runner read without linking the HTTP layer, the actuator and /lastn",
	},
	"regions": {
		imports:     []string{"internal/clock", "internal/redact", "registry", "registry/wire", "report"},
		testImports: []string{"internal/testwait", "registry/registrytest"},
		why:         "remote regions: their config, one fetcher per region, the immutable views the Eureka API merges; the registry never sees them",
	},
	"regions/regionstest": {
		imports: []string{"registry", "registry/wire", "regions"},
		why:     "what the remote-region tests of the Eureka API and of the node share: a client's fetch and the copy it keeps",
	},
	"dns": {
		imports:     []string{"registry"},
		testImports: []string{"internal/testwait", "registry/registrytest"},
		why:         "the DNS interface: reads registry snapshots like any other consumer, knows nothing of HTTP or the cluster",
	},
	"xds": {
		imports:     []string{"auth", "internal/clock", "registry", "report"},
		testImports: []string{"internal/testwait", "registry/registrytest", "tlsconfig"},
		why:         "the xDS control plane: follows the registry's change stream and snapshots, checks stream credentials with auth, knows nothing of HTTP or the cluster",
	},
	"healthcheck": {
		imports:     []string{"registry", "report"},
		testImports: []string{"registry/registrytest", "replication/replicationtest"},
		why:         "server-side health checks: reads registry snapshots, writes the server-owned status through Apply; who probes what is a hash over member names it is given",
	},
	"tlsconfig": {
		testImports: []string{"internal/keystoretest"},
		why:         "a node's TLS identity from PEM files or Java keystores, its rotation, and muster tls's CA; crypto only",
	},
	"internal/keystoretest": {
		why: "Java keystores for tests, made by keytool or committed; stdlib only",
	},
	"internal/logging": {
		why: "the commands' zerolog set-up; zerolog only",
	},
	"internal/proccontrol": {
		why: "process CPU/memory/profile control for benchmarked processes; stdlib only",
	},
	"internal/springconf": {
		why: "Spring Boot's reading of a config file (documents, profiles, placeholders); yaml only",
	},
	"internal/gzjoin": {
		why: "one gzip member from separately compressed pieces; compress only",
	},
	"internal/clock": {
		why: "the one Clock interface of what waits on a schedule (client, regions, xds warm-ups) and the real clock; stdlib only",
	},
	"internal/redact": {
		why: "the one way to hide a URL's password (client, replication, tools, cmd); stdlib only",
	},
	"internal/testwait": {
		why: "the one poll helper for tests that wait on real I/O; testing only",
	},
	"internal/testlog": {
		why: "the log sink of tests that read what was logged (concurrent writers, zerolog's JSON lines); stdlib only",
	},
	"internal/testhttp": {
		why: "the one HTTP client of the HTTP layer's tests (headers as pairs, gzip and redirects left to the test); stdlib only",
	},
	"internal/depcheck": {
		why: "this test",
	},
	// The Go client library: any Go service may import it.
	"client": {
		imports:     []string{"internal/clock", "internal/redact", "registry", "registry/wire"},
		testImports: []string{"httpapi", "internal/testwait", "registry/registrytest"},
		why:         "a Eureka client for Go services: the wire format, never the server (tests run a node in process)",
	},
	// A node's configuration: every key, loaded as Spring Boot loads it.
	"settings": {
		imports: []string{"auth", "cluster", "dns", "drain", "healthcheck", "httpapi", "httpapi/ops", "internal/springconf", "registry", "registry/persist", "regions", "replication", "tlsconfig", "xds"},
		why:     "the typed configuration of a node: the packages' Configs (types and Validate only; it starts nothing), Spring's names, the loader, validation, config --check; never node, never the command line",
	},
	// One node, assembled: what `muster serve` and the benchmark start.
	"node": {
		imports:     []string{"auth", "cluster", "dns", "drain", "healthcheck", "httpapi", "httpapi/ops", "internal/redact", "registry", "registry/persist", "regions", "replication", "report", "settings", "tlsconfig", "xds"},
		testImports: []string{"internal/testlog", "internal/keystoretest", "internal/testwait", "regions/regionstest", "registry/registrytest", "registry/wire"},
		why:         "the assembly of a node from the settings it is handed: every server package, no tool, never the command line",
	},
	// The server binary: the command line around the node package.
	"cmd/muster": {
		imports:     []string{"drain", "httpapi/ops", "internal/logging", "internal/redact", "node", "replication", "settings", "tlsconfig"},
		testImports: []string{"client", "httpapi", "internal/keystoretest", "internal/testwait"},
		why:         "flags and subcommands; settings are package settings', a node is package node's; links no tool (tools/, scripts/)",
	},
	// Tools: their own mains, never imported by the server.
	"tools/loadgen": {
		why: "a load generator needs no Muster code",
	},
	"tools/simclient": {
		imports:     []string{"client", "internal/redact", "registry"},
		testImports: []string{"internal/testlog", "httpapi", "internal/testwait", "registry/registrytest", "registry/wire", "tlsconfig"},
		why:         "simulated Eureka clients on the client package, so every chaos run exercises it; never the server",
	},
	"tools/clients": {
		imports: []string{"internal/logging", "tools/simclient"},
		why:     "the simulated clients' command",
	},
	"tools/bench": {
		imports:     []string{"client", "httpapi", "internal/logging", "internal/proccontrol", "interop/interoptest", "node", "registry", "registry/wire", "replication", "settings", "tlsconfig", "tools/loadgen", "xds"},
		testImports: []string{"dns", "internal/testwait"},
		why:         "starts package node in a child process of its own (bench node); micro benchmarks call the packages in process; watchers are the client package's; peers' batches are replication's own encoding; the xds control takes the node's stream window from xds; the java scenario's Spring server is built by interoptest",
	},
	"deploy": {
		testImports: []string{"auth", "dns", "healthcheck", "httpapi", "registry", "replication"},
		why:         "no code; its tests scrape a node's /metrics for the dashboard and alert rules beside it",
	},
	"interop/interoptest": {
		imports: []string{"internal/testwait"},
		why:     "what the interop tests share: the muster binary as a process, real clients built by Maven, npm and pip into a cache outside the repo",
	},
	"interop/interoptest/prebuild": {
		imports: []string{"interop/interoptest"},
		why:     "scripts/test.sh builds the interop sources before go test",
	},
	"interop/configserver": {
		testImports: []string{"interop/interoptest", "internal/testwait"},
		why:         "no code; its tests run the muster binary against a real Spring Cloud Config Server built by Maven",
	},
	"interop/scripted": {
		testImports: []string{"internal/testwait", "interop/interoptest"},
		why:         "no code; its tests drive eureka-js-client (npm) and py-eureka-client (PyPI) with the muster binary",
	},
	"interop/startup": {
		testImports: []string{"interop/interoptest"},
		why:         "no code; its tests run muster binaries through start-ups on real time (a cluster's cold start, wait-time 0)",
	},
	"interop/springserver": {
		testImports: []string{"client", "interop/interoptest", "internal/testwait"},
		why:         "no code; its tests run the Spring Cloud Eureka Server (built by Maven) as Muster's peer and migration partner",
	},
	"interop/spring": {
		testImports: []string{"internal/testwait", "interop/interoptest"},
		why:         "no code; its tests run Spring Boot apps and Netflix's eureka-client, built by Maven, against muster binaries",
	},
	"scripts/chaos": {
		imports: []string{"client", "httpapi/ops", "registry", "registry/wire", "tools/simclient"},
		why:     "drives a docker-compose cluster; reads the nodes' and clients' JSON; watches with the client package",
	},
	"scripts/chaos/checker": {
		why: "the Jepsen-style checker: runs muster binaries in network namespaces and speaks Eureka's HTTP API itself; stdlib only",
	},
	"scripts/chaos/pipe": {
		why: "joins stdin/stdout to a TCP address inside a node's container (the chaos harness's tunnel); stdlib only",
	},
}

// pkg is what go list says about one package.
type pkg struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

func TestDeps_everyPackageImportsOnlyWhatItsRuleAllows(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < len(allowed)/2 {
		t.Fatalf("go list found %d packages, the table has %d: the listing is broken", len(pkgs), len(allowed))
	}
	for _, p := range check(pkgs, allowed) {
		t.Error(p)
	}
}

// The checker itself catches every kind of mistake it is there for, so that
// the test above cannot pass by checking nothing.
func TestDeps_checkCatchesEachKindOfViolation(t *testing.T) {
	rules := map[string]rule{
		"core":     {testImports: []string{"core/fix"}},
		"core/fix": {imports: []string{"core"}},
		"edge":     {imports: []string{"core"}},
		"gone":     {},
		"typo":     {imports: []string{"nope"}},
	}
	// Paths without a dot are project packages; the rest are not ours.
	abs := func(l []string) []string {
		var out []string
		for _, s := range l {
			if strings.Contains(s, ".") {
				out = append(out, s)
			} else {
				out = append(out, module+"/"+s)
			}
		}
		return out
	}
	p := func(path string, imports, tests, xtests []string) pkg {
		return pkg{ImportPath: module + "/" + path, GoFiles: []string{"x.go"}, Imports: abs(imports), TestImports: abs(tests), XTestImports: abs(xtests)}
	}
	pkgs := []pkg{
		p("core", []string{"github.com/rs/zerolog", "edge"}, []string{"core/fix"}, []string{"core", "edge"}),
		p("core/fix", []string{"core"}, nil, nil),
		p("edge", []string{"core", "core/fix"}, nil, nil),
		p("typo", nil, nil, nil),
		p("new", nil, nil, nil),
		{ImportPath: module + "/empty", Error: &struct{ Err string }{"no Go files"}},
	}
	got := check(pkgs, rules)
	want := []string{
		`"gone" is in the table but go list has no such package with Go files`,
		"core imports edge; it may import only [] ()",                  // forbidden import in code
		"core's tests import edge; they may import only [core/fix] ()", // forbidden import in tests
		"edge imports core/fix; it may import only [core] ()",          // a test helper in production code
		"empty: no Go files",
		"new is not in the table of internal/depcheck: add it with the project packages it may import",
		`typo may import "nope", which is not in the table`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("check said:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// check returns every violation of rules by pkgs, sorted.
func check(pkgs []pkg, rules map[string]rule) []string {
	var out []string
	rel := func(path string) (string, bool) {
		if r, ok := strings.CutPrefix(path, module+"/"); ok {
			return r, true
		}
		return "", path == module
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		name, _ := rel(p.ImportPath)
		if p.Error != nil {
			out = append(out, fmt.Sprintf("%s: %s", name, p.Error.Err))
			continue
		}
		if len(p.GoFiles) == 0 {
			out = append(out, fmt.Sprintf("%s has no Go files besides tests", name))
		}
		seen[name] = true
		r, ok := rules[name]
		if !ok {
			out = append(out, fmt.Sprintf("%s is not in the table of internal/depcheck: add it with the project packages it may import", name))
			continue
		}
		for _, imp := range p.Imports {
			if d, ours := rel(imp); ours && !slices.Contains(r.imports, d) {
				out = append(out, fmt.Sprintf("%s imports %s; it may import only %v (%s)", name, d, r.imports, r.why))
			}
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if d, ours := rel(imp); ours && d != name && !slices.Contains(r.imports, d) && !slices.Contains(r.testImports, d) {
				out = append(out, fmt.Sprintf("%s's tests import %s; they may import only %v (%s)", name, d, slices.Concat(r.imports, r.testImports), r.why))
			}
		}
	}
	for name, r := range rules {
		if !seen[name] {
			out = append(out, fmt.Sprintf("%q is in the table but go list has no such package with Go files", name))
		}
		for _, d := range slices.Concat(r.imports, r.testImports) {
			if _, ok := rules[d]; !ok {
				out = append(out, fmt.Sprintf("%s may import %q, which is not in the table", name, d))
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// listPackages runs go list over the whole module.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the packages")
	}
	root, err := exec.Command(gobin, "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-e", "-json", "./...")
	cmd.Dir = strings.TrimSpace(string(root))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./...: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
