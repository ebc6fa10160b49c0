// Package console owns the operator's dashboard at / (and /dashboard,
// /console): Eureka's status page (System Status, the self-preservation
// banners in Eureka's words, DS Replicas, General Info) grown into a
// console that stays small at 100k instances.
//
// Every list is paginated and filtered on the server; the apps overview
// is derived once per registry version (index.go); the self-preservation
// chart is an inline SVG drawn from an hour of samples (history.go,
// chart.go); the page refreshes its live part when GET
// /console/api/summary says the registry or the samples changed. Actions
// (actions.go) go through the registry's Apply, as the Eureka API does,
// so they replicate; they are guarded by a session cookie and a CSRF
// token. Nothing is loaded from anywhere else: the stylesheet and script
// are embedded (assets/).
//
// The console knows nothing of the Eureka API: it reads the registry
// through its own narrow Registry interface, and httpapi mounts it with
// the server's middleware (Routes).
package console
