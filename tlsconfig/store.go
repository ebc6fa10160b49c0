package tlsconfig

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// ClientAuth is what the server asks of clients, in Spring's words
// (server.ssl.client-auth).
type ClientAuth int

const (
	ClientAuthNone ClientAuth = iota // no client certificate asked for
	ClientAuthWant                   // asked for; verified when one is sent
	ClientAuthNeed                   // required and verified: the handshake fails without one
)

// ParseClientAuth reads none, want or need (any case).
func ParseClientAuth(s string) (ClientAuth, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return ClientAuthNone, nil
	case "want":
		return ClientAuthWant, nil
	case "need":
		return ClientAuthNeed, nil
	}
	return 0, fmt.Errorf("tlsconfig: client auth %q: want none, want or need", s)
}

func (a ClientAuth) String() string {
	switch a {
	case ClientAuthWant:
		return "want"
	case ClientAuthNeed:
		return "need"
	}
	return "none"
}

func (a ClientAuth) tlsType() tls.ClientAuthType {
	switch a {
	case ClientAuthWant:
		return tls.VerifyClientCertIfGiven
	case ClientAuthNeed:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// File names one of the inputs (a file, or a password or alias of a
// keystore), so callers can name their setting in an error.
type File int

const (
	FileCertificate        File = iota // the node's certificate (chain), PEM
	FileKey                            // its private key, PEM (PKCS#8, SEC1 or PKCS#1)
	FileTrust                          // the CA bundle peers and clients are verified against, PEM
	FileKeyStore                       // the keystore holding the node's key and chain (PKCS12 or JKS)
	FileKeyStorePassword               // its password
	FileKeyAlias                       // the alias of the key entry in it
	FileKeyPassword                    // the password of that entry's key
	FileTrustStore                     // the keystore of the certificates peers and clients are verified against
	FileTrustStorePassword             // its password
)

func (f File) String() string {
	switch f {
	case FileKey:
		return "private key"
	case FileTrust:
		return "trust certificate"
	case FileKeyStore:
		return "key store"
	case FileKeyStorePassword:
		return "key store password"
	case FileKeyAlias:
		return "key alias"
	case FileKeyPassword:
		return "key password"
	case FileTrustStore:
		return "trust store"
	case FileTrustStorePassword:
		return "trust store password"
	}
	return "certificate"
}

// IsFile tells whether f names a file (then a FileError's Path is that
// file) rather than a password or alias of the keystore at Path.
func (f File) IsFile() bool {
	switch f {
	case FileKeyStorePassword, FileKeyAlias, FileKeyPassword, FileTrustStorePassword:
		return false
	}
	return true
}

// FileError is a problem with one input. Its text never holds a
// password.
type FileError struct {
	File File
	Path string
	Err  error
}

func (e *FileError) Error() string {
	if !e.File.IsFile() {
		return fmt.Sprintf("tlsconfig: %s of %s: %v", e.File, e.Path, e.Err)
	}
	return fmt.Sprintf("tlsconfig: %s %s: %v", e.File, e.Path, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// Config says where the node's key and certificates are (PEM files or
// Java keystores) and what the server asks of clients.
type Config struct {
	// CertFile is the node's certificate, optionally followed by
	// intermediates. Required unless KeyStore is set. A "file:" prefix
	// (Spring's resource syntax) is accepted.
	CertFile string
	// KeyFile is the private key of CertFile. Required with CertFile.
	KeyFile string
	// KeyStore holds the node's key and certificate chain instead of
	// CertFile and KeyFile (one or the other).
	KeyStore KeyStore
	// KeyAlias picks the key entry of KeyStore; empty takes its only key
	// entry (a store with several needs it).
	KeyAlias string
	// KeyPassword decrypts that entry's key; empty means
	// KeyStore.Password, as in Spring. JKS entries may have a password of
	// their own; a PKCS12 store has one password (keytool makes it so), so
	// there it is not needed.
	KeyPassword string
	// TrustFile is the CA bundle: client certificates (want, need) and
	// peers' server certificates are verified against it. Required for
	// want and need unless TrustStore is set; empty means peers are
	// verified against the system's roots.
	TrustFile string
	// TrustStore is TrustFile as a keystore (one or the other): its
	// trusted certificates and the certificates of its key entries are
	// trusted.
	TrustStore KeyStore
	// ClientAuth is none, want or need. Default none.
	ClientAuth ClientAuth
	// ReloadInterval is how often Run looks at the files. Default 10 s:
	// a rotated certificate is served within that long; each look reads
	// three small files.
	ReloadInterval time.Duration
	// Logger gets reloads (info) and refused new files (error), under
	// component=tls. The zero value logs nothing.
	Logger zerolog.Logger
}

// identity is one loaded set of files; it never changes once built.
type identity struct {
	cert   *tls.Certificate
	leaf   *x509.Certificate
	pool   *x509.CertPool // nil without a trust file
	server *tls.Config    // what the listener serves with this identity
	digest [sha256.Size]byte
}

// Store holds the current identity. All methods are safe for concurrent
// use.
type Store struct {
	cfg Config
	log zerolog.Logger

	// mu guards cur and refused.
	mu      sync.RWMutex
	cur     *identity
	refused [sha256.Size]byte // digest of the last files refused, logged once
}

// Load reads the files and returns a Store serving them. Errors are
// *FileError values naming the file at fault.
func Load(cfg Config) (*Store, error) {
	cfg.CertFile = stripFilePrefix(cfg.CertFile)
	cfg.KeyFile = stripFilePrefix(cfg.KeyFile)
	cfg.TrustFile = stripFilePrefix(cfg.TrustFile)
	cfg.KeyStore.Path = stripFilePrefix(cfg.KeyStore.Path)
	cfg.TrustStore.Path = stripFilePrefix(cfg.TrustStore.Path)
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = 10 * time.Second
	}
	for _, ks := range []struct {
		store *KeyStore
		file  File
	}{{&cfg.KeyStore, FileKeyStore}, {&cfg.TrustStore, FileTrustStore}} {
		t, err := ParseStoreType(ks.store.Type)
		if err != nil {
			return nil, &FileError{File: ks.file, Path: ks.store.Path, Err: err}
		}
		ks.store.Type = t
	}
	switch {
	case cfg.KeyStore.Path != "" && (cfg.CertFile != "" || cfg.KeyFile != ""):
		return nil, &FileError{File: FileKeyStore, Path: cfg.KeyStore.Path, Err: errors.New("set together with PEM certificate and key files: give one or the other")}
	case cfg.TrustStore.Path != "" && cfg.TrustFile != "":
		return nil, &FileError{File: FileTrustStore, Path: cfg.TrustStore.Path, Err: errors.New("set together with a PEM trust certificate: give one or the other")}
	case cfg.KeyStore.Path != "":
	case cfg.CertFile == "":
		return nil, &FileError{File: FileCertificate, Err: errors.New("not set")}
	case cfg.KeyFile == "":
		return nil, &FileError{File: FileKey, Err: errors.New("not set")}
	}
	if cfg.TrustFile == "" && cfg.TrustStore.Path == "" && cfg.ClientAuth != ClientAuthNone {
		return nil, &FileError{File: FileTrust, Err: fmt.Errorf("not set: client auth %s verifies client certificates against it", cfg.ClientAuth)}
	}
	s := &Store{cfg: cfg, log: cfg.Logger.With().Str("component", "tls").Logger()}
	raw, err := s.read()
	if err != nil {
		return nil, err
	}
	id, err := s.build(raw)
	if err != nil {
		return nil, err
	}
	s.cur = id
	return s, nil
}

// stripFilePrefix drops Spring's "file:" resource prefix.
func stripFilePrefix(p string) string {
	return strings.TrimPrefix(strings.TrimSpace(p), "file:")
}

type rawFiles struct {
	cert, key, trust     []byte
	keyStore, trustStore []byte
}

func (r rawFiles) digest() [sha256.Size]byte {
	h := sha256.New()
	for _, b := range [][]byte{r.cert, r.key, r.trust, r.keyStore, r.trustStore} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

func (s *Store) read() (rawFiles, error) {
	var r rawFiles
	var err error
	if s.cfg.KeyStore.Path != "" {
		if r.keyStore, err = os.ReadFile(s.cfg.KeyStore.Path); err != nil {
			return r, &FileError{File: FileKeyStore, Path: s.cfg.KeyStore.Path, Err: unwrapPath(err)}
		}
	} else {
		if r.cert, err = os.ReadFile(s.cfg.CertFile); err != nil {
			return r, &FileError{File: FileCertificate, Path: s.cfg.CertFile, Err: unwrapPath(err)}
		}
		if r.key, err = os.ReadFile(s.cfg.KeyFile); err != nil {
			return r, &FileError{File: FileKey, Path: s.cfg.KeyFile, Err: unwrapPath(err)}
		}
	}
	if s.cfg.TrustStore.Path != "" {
		if r.trustStore, err = os.ReadFile(s.cfg.TrustStore.Path); err != nil {
			return r, &FileError{File: FileTrustStore, Path: s.cfg.TrustStore.Path, Err: unwrapPath(err)}
		}
	}
	if s.cfg.TrustFile != "" {
		if r.trust, err = os.ReadFile(s.cfg.TrustFile); err != nil {
			return r, &FileError{File: FileTrust, Path: s.cfg.TrustFile, Err: unwrapPath(err)}
		}
	}
	return r, nil
}

// unwrapPath drops the path from an *fs.PathError: FileError names it.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (s *Store) build(r rawFiles) (*identity, error) {
	pair, err := s.buildPair(r)
	if err != nil {
		return nil, err
	}
	id := &identity{cert: pair, leaf: pair.Leaf, digest: r.digest()}
	switch {
	case s.cfg.TrustStore.Path != "":
		certs, err := decodeTrustStore(r.trustStore, s.cfg.TrustStore)
		if err != nil {
			return nil, err
		}
		id.pool = x509.NewCertPool()
		for _, c := range certs {
			id.pool.AddCert(c)
		}
	case s.cfg.TrustFile != "":
		id.pool = x509.NewCertPool()
		if !appendCerts(id.pool, r.trust) {
			return nil, &FileError{File: FileTrust, Path: s.cfg.TrustFile, Err: errors.New("no PEM CERTIFICATE block that parses")}
		}
	}
	id.server = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*pair},
		ClientCAs:    id.pool,
		ClientAuth:   s.cfg.ClientAuth.tlsType(),
	}
	return id, nil
}

// buildPair is the node's key and certificate chain, from the keystore or
// the PEM files.
func (s *Store) buildPair(r rawFiles) (*tls.Certificate, error) {
	if s.cfg.KeyStore.Path != "" {
		return decodeKeyPair(r.keyStore, keyStoreInputs{store: s.cfg.KeyStore, alias: s.cfg.KeyAlias, keyPassword: s.cfg.KeyPassword})
	}
	if !bytes.Contains(r.cert, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, &FileError{File: FileCertificate, Path: s.cfg.CertFile, Err: errors.New("no PEM CERTIFICATE block")}
	}
	if !bytes.Contains(r.key, []byte("PRIVATE KEY-----")) {
		return nil, &FileError{File: FileKey, Path: s.cfg.KeyFile, Err: errors.New("no PEM PRIVATE KEY block")}
	}
	pair, err := tls.X509KeyPair(r.cert, r.key)
	if err != nil {
		// The PEM blocks are there, so this is a key of another certificate
		// or a block that does not parse; the key file is the likelier
		// culprit, and the message names both.
		return nil, &FileError{File: FileKey, Path: s.cfg.KeyFile, Err: fmt.Errorf("does not load with certificate %s: %v", s.cfg.CertFile, err)}
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, &FileError{File: FileCertificate, Path: s.cfg.CertFile, Err: err}
		}
	}
	return &pair, nil
}

// certSource and trustSource name where the certificate and the trust
// bundle come from, for messages.
func (s *Store) certSource() string {
	if s.cfg.KeyStore.Path != "" {
		return "in key store " + s.cfg.KeyStore.Path
	}
	return s.cfg.CertFile
}

func (s *Store) trustSource() string {
	if s.cfg.TrustStore.Path != "" {
		return "store " + s.cfg.TrustStore.Path
	}
	return "certificate " + s.cfg.TrustFile
}

// appendCerts adds every certificate of a PEM bundle and reports whether
// there was at least one.
func appendCerts(pool *x509.CertPool, bundle []byte) bool {
	n := 0
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return n > 0
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue
		}
		pool.AddCert(c)
		n++
	}
}

func (s *Store) current() *identity {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur
}

// Leaf is the certificate currently served.
func (s *Store) Leaf() *x509.Certificate { return s.current().leaf }

// ClientAuth is the configured client authentication.
func (s *Store) ClientAuth() ClientAuth { return s.cfg.ClientAuth }

// Reload reads the files and, when their content changed and loads,
// swaps it in; changed reports a swap. A set that does not load (or a file
// that cannot be read) keeps the current identity and returns the error,
// which is logged once until the files change again.
func (s *Store) Reload() (changed bool, err error) {
	raw, err := s.read()
	var mark [sha256.Size]byte
	if err != nil {
		mark = sha256.Sum256([]byte(err.Error()))
	} else {
		mark = raw.digest()
	}
	s.mu.RLock()
	same, refusedBefore := mark == s.cur.digest, mark == s.refused
	s.mu.RUnlock()
	switch {
	case same:
		return false, nil
	case refusedBefore:
		return false, errRefusedBefore
	}
	if err == nil {
		var id *identity
		if id, err = s.build(raw); err == nil {
			s.mu.Lock()
			s.cur = id
			s.refused = [sha256.Size]byte{}
			s.mu.Unlock()
			s.log.Info().Str("subject", id.leaf.Subject.CommonName).Str("serial", id.leaf.SerialNumber.Text(16)).
				Time("not_after", id.leaf.NotAfter).Msg("TLS certificate reloaded: new connections use it")
			return true, nil
		}
	}
	s.mu.Lock()
	s.refused = mark
	s.mu.Unlock()
	s.log.Error().Err(err).Msg("new TLS files refused; still serving the previous certificate")
	return false, err
}

// errRefusedBefore is Reload's answer for files already refused and
// logged.
var errRefusedBefore = errors.New("tlsconfig: files unchanged since they were refused")

// Run reloads every ReloadInterval until ctx ends.
func (s *Store) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = s.Reload()
		}
	}
}

// ServerConfig is the listener's config: every handshake takes the
// identity current at that moment.
func (s *Store) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.current().server, nil
		},
	}
}

// ClientConfig is a config for dialing serverName: the peer is verified
// against the trust bundle (system roots without one) and, when it asks,
// the node's own certificate is presented. Taken fresh for every dial, it
// follows rotations.
func (s *Store) ClientConfig(serverName string) *tls.Config {
	id := s.current()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		RootCAs:    id.pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.current().cert, nil
		},
	}
}

// DialTLSContext returns a dial function for http.Transport.DialTLSContext:
// it connects with dialer and completes the handshake with ClientConfig
// for the address's host.
func (s *Store) DialTLSContext(dialer *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		raw, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, s.ClientConfig(host))
		if err := conn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return conn, nil
	}
}

// Check returns warnings about the current identity that are not errors:
// a certificate that has expired or is not yet valid, or one the trust
// bundle does not vouch for (peers verifying against the same bundle would
// refuse it).
func (s *Store) Check(now time.Time) []string {
	id := s.current()
	var out []string
	if now.After(id.leaf.NotAfter) {
		out = append(out, fmt.Sprintf("certificate %s expired at %s", s.certSource(), id.leaf.NotAfter.UTC().Format(time.RFC3339)))
	} else if now.Before(id.leaf.NotBefore) {
		out = append(out, fmt.Sprintf("certificate %s is not valid before %s", s.certSource(), id.leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	if id.pool != nil {
		inter := x509.NewCertPool()
		for _, der := range id.cert.Certificate[1:] {
			if c, err := x509.ParseCertificate(der); err == nil {
				inter.AddCert(c)
			}
		}
		if _, err := id.leaf.Verify(x509.VerifyOptions{Roots: id.pool, Intermediates: inter, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			out = append(out, fmt.Sprintf("certificate %s does not verify against trust %s (%v): peers using that bundle will refuse it", s.certSource(), s.trustSource(), err))
		}
	}
	return out
}
