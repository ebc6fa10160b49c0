// Package springconf reads Spring Boot configuration files the way Spring
// Boot and Spring Cloud do, and flattens them to dotted keys whose values
// remember the file and line they came from.
//
// It owns the Spring side of the format and nothing of Muster's: the
// locations (spring.config.location's comma list of files and folders,
// optional: and file: prefixes, spring.config.additional-location, Spring
// Cloud's bootstrap.yml read before application.yml); every YAML document
// of a file (split on ---) and every .properties document (split on
// #---) in order; spring.config.import of files, read right after the
// document that names them; profile documents
// (spring.config.activate.on-profile, the legacy spring.profiles, with !,
// & and | expressions and lists) applied when their profile is active; the
// active profiles from spring.profiles.active and spring.profiles.include
// in the files (and in profile documents), profile groups
// (spring.profiles.group.*), the SPRING_PROFILES_ACTIVE environment
// variable and the caller's own (Muster's --profile); the profile-specific
// files beside each file (NAME-{profile}.yml|yaml|properties and
// application-{profile}.*), later winning; configserver: imports fetched
// from a Spring Cloud Config Server over HTTP as Spring Cloud Config's
// client does (/{name}/{profiles}[/{label}], basic auth, fail-fast and
// retry, optional:); and ${name} / ${name:default} placeholders in any
// value, resolved from the caller's overrides, the environment (exact
// name, then Spring's relaxed SERVER_PORT form), the merged keys
// themselves and Spring's ${random.*}, nested and guarded against cycles.
//
// Which keys mean something is the caller's business: the package never
// refuses a key, and tells which keys placeholders read. It imports no
// project package.
package springconf
