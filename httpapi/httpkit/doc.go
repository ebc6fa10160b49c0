// Package httpkit holds the few helpers the HTTP layer's parts share: the
// authenticated user on a request's context (set by the server's
// authentication, read by the console's actions), bad-request errors, path parameters unescaped once,
// gzip when a client asks for it, and Eureka's way of writing an uptime.
// It imports nothing of the project but auth and registry.
package httpkit
