package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/muster-registry/muster/settings"
)

// configFlags are the flags of every command that loads the
// configuration (serve, config): --config, --profile, --set, and Spring
// Boot's command line, --KEY=VALUE (or --KEY VALUE) for any key.
type configFlags struct {
	file       string
	additional string
	profiles   stringList
	sets       stringList
}

func (c *configFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.file, "config", "", "YAML, JSON or .properties file(s) with settings, read as Spring Boot reads application.yml: a comma list of files and folders, optional: allowed, later winning, as spring.config.location (docs/spring-config.md)")
	fs.Var(&c.profiles, "profile", "active Spring profile(s), comma-separated or repeated; wins over SPRING_PROFILES_ACTIVE and the file's spring.profiles.active")
	fs.Var(&c.sets, "set", "key=value, overrides the file and the environment (repeatable); --KEY=VALUE does the same")
}

func (c *configFlags) request(env []string) settings.LoadRequest {
	return settings.LoadRequest{File: c.file, AdditionalLocations: c.additional, Env: env, Sets: c.sets, Profiles: c.profiles}
}

// parseConfigArgs parses a command's flags where, as on Spring Boot's
// command line, --KEY=VALUE (and --KEY VALUE) sets any configuration key
// that is not a flag of the command: muster serve --server.port=8762.
// --spring.profiles.active is --profile, --spring.config.location is
// --config and --spring.config.additional-location adds locations, as in
// Spring.
func parseConfigArgs(fs *flag.FlagSet, c *configFlags, args []string) error {
	var flagArgs []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			flagArgs = append(flagArgs, args[i:]...)
			break
		}
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			flagArgs = append(flagArgs, arg)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if f := fs.Lookup(name); f != nil || name == "h" || name == "help" {
			flagArgs = append(flagArgs, arg)
			if f == nil || hasValue || i+1 >= len(args) {
				continue
			}
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !bf.IsBoolFlag() {
				i++
				flagArgs = append(flagArgs, args[i])
			}
			continue
		}
		if !strings.HasPrefix(arg, "--") {
			flagArgs = append(flagArgs, arg) // -x: the flag package says what is wrong
			continue
		}
		if !hasValue {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
				return fmt.Errorf("%s: want --KEY=VALUE (or --KEY VALUE)", arg)
			}
			i++
			value = args[i]
		}
		switch settings.CanonicalKey(name) {
		case settings.CanonicalKey("spring.profiles.active"):
			c.profiles = append(c.profiles, value)
		case settings.CanonicalKey("spring.config.location"):
			c.file = value
		case settings.CanonicalKey("spring.config.additional-location"):
			c.additional = joinList(c.additional, value)
		default:
			c.sets = append(c.sets, name+"="+value)
		}
	}
	return fs.Parse(flagArgs)
}

// joinList appends to a comma list.
func joinList(list, more string) string {
	if list == "" {
		return more
	}
	return list + "," + more
}

// configCmd lists every setting with its default, or with --check (or a
// --config, --profile or key given) loads the configuration as serve
// would and reports on it: every problem, then each effective setting
// with where it came from. It fails when serve would refuse to start.
func configCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: muster config [--markdown]\n       muster config --check [--config FILE] [--profile P] [--set key=value]... [--KEY=VALUE]...")
		fs.PrintDefaults()
	}
	markdown := fs.Bool("markdown", false, "print docs/configuration.md's table of settings")
	check := fs.Bool("check", false, "load the configuration as serve does, print every problem and the effective settings with their origins; exit 1 on any error")
	var cf configFlags
	cf.register(fs)
	if err := parseConfigArgs(fs, &cf, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("config: unexpected argument %q", fs.Arg(0))
	}
	if !*check && cf.file == "" && cf.additional == "" && len(cf.profiles) == 0 && len(cf.sets) == 0 {
		printSettings(stdout, *markdown)
		return nil
	}
	s, rep, err := settings.Load(cf.request(os.Environ()))
	if rep == nil {
		return err
	}
	if err == nil {
		// What serve opens before it listens: key stores with their
		// passwords, PEM files. A check that passes means serve can
		// read them.
		warnings, ferr := s.CheckFiles()
		for _, w := range warnings {
			rep.Notices = append(rep.Notices, settings.Notice{Warn: true, Msg: w})
		}
		if ferr != nil {
			rep.Errors = append(rep.Errors, strings.Split(ferr.Error(), "\n")...)
			err = ferr
		}
	}
	writeCheck(stdout, s, rep)
	if err != nil {
		return fmt.Errorf("config: %d error(s): the node would not start", max(1, len(rep.Errors)))
	}
	return nil
}

// writeCheck prints a load's report for a person.
func writeCheck(w io.Writer, s *settings.Settings, rep *settings.Report) {
	if len(rep.Files) > 0 {
		fmt.Fprintf(w, "Files read: %s\nActive profiles: %s\n", strings.Join(rep.Files, ", "), strings.Join(rep.Profiles, ", "))
	}
	var warns []string
	for _, n := range rep.Notices {
		if n.Warn {
			warns = append(warns, n.Msg)
		}
	}
	fmt.Fprintf(w, "\nProblems: %d error(s), %d warning(s)\n", len(rep.Errors), len(warns))
	for _, e := range rep.Errors {
		fmt.Fprintln(w, "  error:   "+e)
	}
	for _, m := range warns {
		fmt.Fprintln(w, "  warning: "+m)
	}
	if s != nil {
		fmt.Fprintln(w, "\nEffective settings:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, row := range settings.EffectiveSettings(s, rep) {
			fmt.Fprintf(tw, "  %s\t= %s\t%s\n", row[0], row[1], row[2])
		}
		tw.Flush()
	}
	if len(rep.Ignored) > 0 {
		fmt.Fprintln(w, "\nIgnored keys (not read by Muster):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, ig := range rep.Ignored {
			fmt.Fprintf(tw, "  %s\t= %s\t%s\t%s\n", ig.Key, ig.Value, ig.Origin, ig.Why)
		}
		tw.Flush()
	}
}

// nodeURL reads a --url as people write it: host:port, a base URL or a
// full URL. Without a scheme it gets defaultScheme; without a path it
// gets defaultPath.
func nodeURL(raw, defaultScheme, defaultPath string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		raw = defaultScheme + "://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %s: want http(s)://host:port or host:port", u.Redacted())
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = defaultPath
	}
	return u, nil
}

// schemeOf is the scheme of a URL, http when it has none.
func schemeOf(raw string) string {
	if i := strings.Index(raw, "://"); i > 0 {
		return raw[:i]
	}
	return "http"
}

// helpRequested tells whether a command's error is only -h or --help.
func helpRequested(err error) bool { return errors.Is(err, flag.ErrHelp) }
