// Package wire owns Eureka's JSON and XML wire formats for registry types:
// the applications document (full registry, delta, VIP lookup), a single
// application, and an instance with or without its {"instance":…} wrapper.
// The HTTP API encodes payloads and decodes register bodies with it,
// replication reads and writes peer batches and anti-entropy bodies with
// it, and clients decode documents with it. Every existing Eureka client (Spring Cloud's,
// the Java client, hudl/fargo, go-kit, eureka-js-client, Prometheus's Eureka
// discovery) must read what it writes and be understood when it writes.
//
// # Output: Eureka's shapes, hand-written
//
// The encoders write exactly what Eureka's server codecs write:
// EurekaJacksonCodec for JSON and the XStream converters of Converters.java
// for XML (EUREKA.md §2). That shape is full of warts that reflection-based
// encoding would fight at every step: a root wrapper, "versions__delta" and
// "apps__hashcode" as strings, ports as {"$":8080,"@enabled":"true"} (a
// number, then a boolean as a string), leaseInfo timestamps as numbers but
// lastUpdatedTimestamp and lastDirtyTimestamp as strings, an empty metadata
// map written as {"@class":"java.util.Collections$EmptyMap"}, the override
// spelled overriddenStatus in JSON and overriddenstatus in XML, and XML
// element names coded by XStream ('_' as "__", '$' as "_-"). The encoders are
// append-style functions (strconv.AppendInt, table-driven escaping with an
// 8-bytes-at-a-time fast path for plain ASCII) that reserve the output size
// once, because a full registry is large: about 1.1 KB per instance, so
// 100 000 instances are over 100 MB, and encoding/json needs ~400 ms for it
// (ARCHITECTURE.md) where these need a fraction of that, with one
// allocation or none when the caller reuses its buffer.
//
// Field order follows Eureka's serializer: instanceId (when set), hostName,
// app, ipAddr, sid (left out when empty, "na" or "unknown"), status,
// overriddenStatus, port, securePort, countryId, dataCenterInfo, leaseInfo,
// metadata, then InstanceInfo's @Auto fields as strings in declaration
// order, empty ones left out: appGroupName, homePageUrl, statusPageUrl,
// healthCheckUrl, secureHealthCheckUrl, vipAddress, secureVipAddress,
// isCoordinatingDiscoveryServer (always), lastUpdatedTimestamp and
// lastDirtyTimestamp (always), actionType, asgName. leaseInfo shows the
// instance's renewal interval and duration, or 30 and 90 when it sent
// none, as Eureka's decorateInstanceInfo does. The dataCenterInfo class is
// derived from the name, as Eureka derives it, never copied from what a
// client sent. JSON strings are escaped as Jackson escapes them ('<', '>'
// and '&' stay literal); XML text is escaped so that the output is always
// well-formed; invalid UTF-8 becomes U+FFFD in both. Metadata keys that are
// not XML names are coded with XStream's "_.xxxx" escapes (see
// appendXMLName); an empty key cannot be an element and is left out of XML.
//
// The compact form (encode_compact.go) is what the Java server sends a
// client that asks with X-Eureka-Accept: compact: its JacksonJsonMini and
// JacksonXmlMini encoders, which keep an instance's routing fields only and
// write versions__delta and apps__hashcode after the apps.
//
// # Input: lenient, never a panic
//
// The decoders take what Eureka's decoders take (InstanceInfoDeserializer,
// Converters.InstanceInfoConverter) and what clients are known to send:
//   - numbers or numeric strings for ports, countryId, leaseInfo figures and
//     every timestamp (Spring's client sends bean-style numbers, fargo sends
//     the port as a string); an empty string counts as absent;
//   - port as {"$":8080,"@enabled":"true"}, {"$":"8080","@enabled":true}, a
//     bare 8080 or "8080"; the insecure port is enabled unless its flag says
//     false, the secure port only if its flag says true;
//   - booleans as booleans, strings or numbers; overriddenStatus or
//     overriddenstatus; unknown status names read as UNKNOWN; the legacy
//     leaseInfo key renewalTimestamp;
//   - application and instance as an array or a single object; a single
//     application document where an applications document is expected;
//   - metadata values that are numbers or booleans become strings, nulls
//     and the "@class" marker are dropped; null fields and unknown fields
//     are ignored.
//
// A field the body leaves out gets Eureka's InstanceInfo default: status
// UP, overriddenStatus UNKNOWN, port 7001 enabled, securePort 7002
// disabled, countryId 1, no sid ("na" is stored as ""). leaseInfo left out
// is 0/0, for the registry's defaults; lastDirtyTimestamp and
// lastUpdatedTimestamp left out are 0, for the caller to stamp; a missing
// dataCenterInfo is left zero, for the registry's Validate to report. app
// and appGroupName are upper-cased (InstanceInfo.Builder), a missing
// dataCenterInfo class is filled in from the name, and an instance without
// instanceId but with metadata "instanceId" gets the id Spring Cloud's
// server gives it (hostName:value). A data center name other than MyOwn,
// Netflix or Amazon is refused, as Eureka refuses it.
//
// Anything else that does not fit (bad JSON or XML, truncation, a wrong
// root, an array where an object belongs, a non-numeric port) is an error
// wrapping ErrMalformed with a short reason that names the field.
//
// # Decoders: a reader per format, one field table
//
// jsonreader.go is a small strict JSON reader (RFC 8259) with a nesting
// limit, driven by the expected shape; decoded strings share the body's
// memory. xmlreader.go walks encoding/xml's tokens, which admit no entities
// beyond XML's own. Neither knows Eureka. The instance's fields are named
// once, in the field table of fields.go (the instance's and leaseInfo's),
// each with its kind (text, status, number, port, …) and where it goes; the
// JSON and XML decoders (decode_json.go, decode_xml.go) look every key or
// element up there and read the value as their format writes that kind, so
// a field added to the table is read from both formats alike.
//
// # One JSON scanner
//
// scan.go holds the JSON primitives every reader of Eureka's JSON shares:
// white space, the grammar of an integer, and extent, which finds where a
// value ends by its strings and brackets and resumes when its input grows.
// jsonreader.go's strict reader (instances, applications) and
// stream_decode.go's window on an io.Reader (syncUp's ReadApplicationsJSON)
// use them, and so does Scanner, the exported quick token reader that the
// peer batch fast path (batch_fast.go) drives: it reads the common case
// and says false for anything else, which then goes to encoding/json.
//
// # Between peers
//
// batch.go and batch_fast.go are POST /peerreplication/batch as Eureka's
// ReplicationList and ReplicationListResponse write it (ReplicationItem,
// with Muster's version, health and pieces fields for Muster peers):
// AppendBatch and DecodeBatchResponse for the sender, DecodeBatch and
// InboundBatch.EncodeResponse for the receiver; the common batch is read
// and written without reflection. antientropy.go is the anti-entropy
// exchange between Muster peers (digests, entries, buckets, copies).
// replication/ holds only what is done with them.
//
// # A client's copy of a registry
//
// copy.go holds Copy, the one client-side copy of a registry: replaced by
// a full fetch, updated by a delta as DiscoveryClient#updateDelta updates
// it (ADDED and MODIFIED put, DELETED removes, other action types are
// ignored, each instance filed under its own app name), and compared with
// the server's apps__hashcode by its own. The Go client (client/), the
// remote-region fetchers (regions/) and the simulated clients (through
// client/) keep theirs in it.
// copyview.go holds CopyView, a copy as served at one moment (apps,
// counts, a version, the changes in the retention): what regions/ publishes
// per remote region and the Eureka API merges, so neither imports the
// other.
package wire
