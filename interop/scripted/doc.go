// Package scripted holds no code: its tests run the Eureka clients that
// other languages' teams use, as their users get them from their own
// registries, against real Muster nodes (the muster binary):
//
//   - eureka-js-client 4.5.0 from npm (interop/jsclient: package.json,
//     package-lock.json and driver.js),
//   - py-eureka-client 0.13.3 from PyPI (interop/pyclient: requirements.txt
//     with every dependency pinned, and driver.py).
//
// Each client is driven by a small script of the project's own, steered
// over stdin and printing one JSON object a line, so a test reads what the
// client did and saw. Every scenario runs each client through a WireTap
// (interop/interoptest) and names, when it fails, every exchange the client
// had with the node: method, path, query, Accept and Content-Type sent, and
// the status, Content-Type and Content-Encoding answered.
//
// The scenarios: register, heartbeats, full fetch then deltas (with the
// client's own hashcode check where it has one), status change with an
// operator's override and its removal, metadata, cancel on shutdown,
// registering again after a heartbeat 404 (an operator's cancel, an
// eviction of a client cut off too long, a node restarted without a data
// dir), failover between two nodes, basic auth from user:pass@ in the
// service URL, and TLS with the client's own way of trusting a CA.
//
// The builds (npm ci, a venv with pip) run into the interop cache outside
// the repository; where node/npm or python3 is missing, or the registry
// cannot be reached, the tests skip with one line saying why.
package scripted
