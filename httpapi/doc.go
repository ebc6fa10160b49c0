// Package httpapi is the HTTP server of a Muster node: it mounts the parts
// of the HTTP layer, each a package for its audience, behind one
// middleware chain (panics, metrics, authentication) and one lifecycle
// (New starts nothing but the watch hub's feed; Run keeps the console's
// samples; HTTPServer's Shutdown ends the watches):
//
//   - httpapi/eureka: Eureka's REST API, the peer endpoints and watches;
//   - httpapi/console: the dashboard at /;
//   - httpapi/ops: /admin/status, /readyz, /livez, /metrics, the actuator
//     and /lastn, and the types the CLI reads;
//   - httpapi/edge: authentication and connection limits;
//   - httpapi/httpkit: the few helpers they share.
//
// errors.go is the one place that turns errors into status codes: bad input
// of any kind is a 4xx with a one-line plain-text reason and changes
// nothing; handler panics become a 500 and a log line, never a crash.
package httpapi
