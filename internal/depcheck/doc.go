// Package depcheck holds the one test of the project's package graph: a
// table of every package in the module and the project packages each may
// import (depcheck_test.go). The arrows point one way — registry at the
// bottom, importing nothing of ours; node, which assembles them, and
// cmd/muster, the command line around it, at the top, importing no tool — and a new package or a new import across packages fails the test
// until the table says it is meant. methods_test.go holds the other
// written rule of the house's shape: no type outside registry/ and node/
// declares more than 30 methods.
//
// The package has no code of its own; it exists so that the test has a home
// that belongs to no package it checks.
package depcheck
