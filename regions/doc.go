// Package regions is Muster's side of Eureka's remote regions: the
// configuration of the regions a node reads (Config), one Fetcher per
// remote region that copies the remote's own instances (a full fetch, then
// deltas reconciled by the apps hashcode), and the immutable View of each
// region that the Eureka API serves next to the local registry: its
// whitelisted applications, each instance marked with the metadata
// muster.region, their hashcode, when they were last fetched, and the
// recent changes a delta request needs.
//
// The registry never learns of remote regions: remote instances are never
// registered, renewed, cancelled, replicated or evicted locally. They live
// only here, per node: every node fetches every remote region itself
// (docs/regions.md says why).
package regions
