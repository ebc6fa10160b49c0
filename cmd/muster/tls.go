package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/muster-registry/muster/tlsconfig"
)

// Files `muster tls` writes, as consul tls does: the CA pair and one pair
// per name.
const (
	caCertFile = "muster-ca.pem"
	caKeyFile  = "muster-ca-key.pem"
)

// tlsCmd makes a CA and node certificates, enough to secure a cluster
// with no other tool (README, "Securing a cluster").
func tlsCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		tlsUsage(stderr)
		return errors.New("tls: want ca or cert")
	}
	switch args[0] {
	case "ca":
		return tlsCACmd(args[1:], stdout, stderr)
	case "cert":
		return tlsCertCmd(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		tlsUsage(stdout)
		return nil
	}
	tlsUsage(stderr)
	return fmt.Errorf("tls: unknown command %q, want ca or cert", args[0])
}

func tlsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  muster tls ca   [--out-dir DIR] [--days 1825] [--common-name "Muster CA"] [--force | --if-missing]
      writes muster-ca.pem and muster-ca-key.pem (ECDSA P-256)
  muster tls cert --name node-a [--dns node-a]... [--ip 10.0.0.5]... [--days 365]
                  [--out-dir DIR] [--ca DIR/muster-ca.pem] [--ca-key DIR/muster-ca-key.pem] [--force | --if-missing]
      writes node-a.pem and node-a-key.pem, signed by the CA, for server and client use;
      --name may repeat: each name gets its own pair, with --dns and --ip added to each
Keys are written with mode 0600, certificates 0644. Existing files are not
overwritten unless --force; --if-missing leaves them and succeeds (for
scripts and one-shot containers that run again).
`)
}

// overwrite is what to do when a file to write exists.
type overwrite struct{ force, ifMissing bool }

func (o *overwrite) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.force, "force", false, "overwrite existing files")
	fs.BoolVar(&o.ifMissing, "if-missing", false, "when all the files exist, leave them and succeed")
}

func tlsCACmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tls ca", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("out-dir", ".", "directory to write to (created if missing)")
	days := fs.Int("days", 1825, "validity in days")
	cn := fs.String("common-name", "Muster CA", "common name of the CA")
	var ow overwrite
	ow.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tls ca: unexpected argument %q", fs.Arg(0))
	}
	if *days < 1 {
		return fmt.Errorf("tls ca: --days %d: want at least 1", *days)
	}
	certPath, keyPath := filepath.Join(*dir, caCertFile), filepath.Join(*dir, caKeyFile)
	if skip, err := ow.check(certPath, keyPath); err != nil || skip {
		if skip {
			fmt.Fprintf(stdout, "kept %s and %s\n", certPath, keyPath)
		}
		return err
	}
	c, k, err := tlsconfig.NewCA(tlsconfig.CAOptions{CommonName: *cn, Validity: time.Duration(*days) * 24 * time.Hour})
	if err != nil {
		return fmt.Errorf("tls ca: %w", err)
	}
	if err := writePair(*dir, certPath, c, keyPath, k); err != nil {
		return fmt.Errorf("tls ca: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s and %s (keep the key safe: whoever has it can mint certificates the cluster trusts)\n", certPath, keyPath)
	return nil
}

func tlsCertCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tls cert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names, dnsNames, ips stringList
	fs.Var(&names, "name", "certificate name: common name and file name (repeatable)")
	fs.Var(&dnsNames, "dns", "DNS name clients and peers dial the node by (repeatable)")
	fs.Var(&ips, "ip", "IP address clients and peers dial the node by (repeatable)")
	dir := fs.String("out-dir", ".", "directory to write to (created if missing)")
	caPath := fs.String("ca", "", "CA certificate (default: muster-ca.pem in --out-dir)")
	caKeyPath := fs.String("ca-key", "", "CA private key (default: muster-ca-key.pem in --out-dir)")
	days := fs.Int("days", 365, "validity in days (never beyond the CA's)")
	var ow overwrite
	ow.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tls cert: unexpected argument %q", fs.Arg(0))
	}
	if len(names) == 0 {
		return errors.New("tls cert: --name is required")
	}
	if *days < 1 {
		return fmt.Errorf("tls cert: --days %d: want at least 1", *days)
	}
	var addrs []net.IP
	for _, s := range ips {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil {
			return fmt.Errorf("tls cert: --ip %q is not an IP address", s)
		}
		addrs = append(addrs, ip)
	}
	for _, name := range names {
		if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return fmt.Errorf("tls cert: --name %q cannot be a file name", name)
		}
	}
	if *caPath == "" {
		*caPath = filepath.Join(*dir, caCertFile)
	}
	if *caKeyPath == "" {
		*caKeyPath = filepath.Join(*dir, caKeyFile)
	}
	caCert, err := os.ReadFile(*caPath)
	if err != nil {
		return fmt.Errorf("tls cert: CA certificate (--ca): %w (make one with: muster tls ca)", err)
	}
	caKey, err := os.ReadFile(*caKeyPath)
	if err != nil {
		return fmt.Errorf("tls cert: CA key (--ca-key): %w", err)
	}
	for _, name := range names {
		certPath, keyPath := filepath.Join(*dir, name+".pem"), filepath.Join(*dir, name+"-key.pem")
		skip, err := ow.check(certPath, keyPath)
		if err != nil {
			return fmt.Errorf("tls cert: %w", err)
		}
		if skip {
			fmt.Fprintf(stdout, "kept %s and %s\n", certPath, keyPath)
			continue
		}
		dns := append([]string{}, dnsNames...)
		if len(names) > 1 && net.ParseIP(name) == nil && !contains(dns, name) {
			// Several nodes at once: each is reachable by its own name.
			dns = append([]string{name}, dns...)
		}
		c, k, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: name, DNSNames: dns, IPs: addrs,
			Validity: time.Duration(*days) * 24 * time.Hour, CACert: caCert, CAKey: caKey})
		if err != nil {
			return fmt.Errorf("tls cert %s: %w", name, err)
		}
		if err := writePair(*dir, certPath, c, keyPath, k); err != nil {
			return fmt.Errorf("tls cert %s: %w", name, err)
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", certPath, keyPath)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// check says whether the files may be written: skip when --if-missing and
// both exist; an error when some exist and --force is not given.
func (o overwrite) check(paths ...string) (skip bool, err error) {
	var existing []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			existing = append(existing, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
	}
	switch {
	case len(existing) == 0 || o.force:
		return false, nil
	case o.ifMissing && len(existing) == len(paths):
		return true, nil
	}
	return false, fmt.Errorf("%s exists: not overwritten without --force", strings.Join(existing, " and "))
}

// writePair writes the key (0600) and then the certificate (0644), each
// to a temporary file renamed into place, so that a node re-reading them
// never sees half a file.
func writePair(dir, certPath string, certPEM []byte, keyPath string, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeAtomic(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return writeAtomic(certPath, certPEM, 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
