// Package settings is a node's configuration: every key Muster reads
// (settings.go), under the names of a Spring Cloud Eureka server's
// application.yml, loaded by Load from the file's documents and profiles
// (through internal/springconf), the environment and the command line, in
// that order.
//
// A key that sets a package's knob sets that package's Config, which
// starts as its DefaultConfig, and a package's Validate error is reported
// under the key that set the field. Spring keys Muster accepts without
// using are one table (springkeys.go), each with the warning that says
// what Muster does instead. classpath: and file: resources are resolved
// here (resources.go); CheckFiles opens the TLS material as the node
// will, for muster config --check; EffectiveSettings and SettingDocs are
// that command's views of the table.
//
// The package builds values only: it starts nothing and never imports
// node. cmd/muster and tools/bench load Settings and hand them to
// node.New.
package settings
