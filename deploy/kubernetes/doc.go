// Package kubernetes holds no code: it is the nested module whose tests
// render the kustomization in this folder and check every manifest against
// the Kubernetes API types (see manifests_test.go and README.md's "Run on
// Kubernetes"). It is a module of its own so that the server's go.mod does
// not carry the Kubernetes and kustomize libraries.
package kubernetes
