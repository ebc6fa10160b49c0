// Package springconf reads a Spring Boot configuration file the way Spring
// Boot does, and flattens it to dotted keys whose values remember the file
// and line they came from.
//
// It owns the Spring side of the format and nothing of Muster's: every YAML
// document of a file (split on ---) and every .properties document (split
// on #---) in order; profile documents (spring.config.activate.on-profile,
// the legacy spring.profiles, with !, & and | expressions and lists)
// applied when their profile is active; the active profiles from
// spring.profiles.active and spring.profiles.include in the files, the
// SPRING_PROFILES_ACTIVE environment variable and the caller's own
// (Muster's --profile); the profile-specific files beside the file
// (NAME-{profile}.yml|yaml|properties and application-{profile}.*), later
// winning; and ${name} / ${name:default} placeholders in any value,
// resolved from the caller's overrides, the environment (exact name, then
// Spring's relaxed SERVER_PORT form), the merged keys themselves and
// Spring's ${random.*}, nested and guarded against cycles.
//
// Which keys mean something is the caller's business: the package never
// refuses a key. It imports no project package.
package springconf
