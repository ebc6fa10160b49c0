// Package dns owns Muster's DNS interface: a miekg/dns server (UDP and
// TCP) in every node that answers A/AAAA and SRV records for the apps and
// VIPs of the registry, A records for live nodes, and the TXT records of
// Eureka's DNS-based server discovery (txt.<region>.<domain> → zones,
// txt.<zone>.<domain> → node host names). It reads the registry's current
// snapshot on every query; an app's A/AAAA and SRV answers are packed once
// per version of the app and reused while the snapshot holds that version
// (packed.go), so a change is visible to the next query. It refuses names
// outside its domain and clients outside its allowed CIDRs, truncates UDP
// answers over the client's limit (TC set; the full answer is over TCP)
// and rate-limits responses per source address so a node cannot amplify a
// spoofed flood. See docs/dns.md.
package dns
