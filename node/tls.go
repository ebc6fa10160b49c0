package node

import (
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/tlsconfig"
)

// TLSOn tells whether the API port serves TLS. As in Spring Boot,
// server.ssl.enabled defaults to true and takes effect once any
// server.ssl.* key is given; false turns TLS off whatever else is set.
func (s *Settings) TLSOn() bool {
	if !s.SSLEnabled {
		return false
	}
	return s.explicit["server.ssl.enabled"] || s.SSLCertificate != "" || s.SSLKey != "" || s.SSLTrust != "" ||
		s.SSLKeyStore != "" || s.SSLKeyStorePassword != "" || s.SSLKeyStoreType != "" || s.SSLKeyAlias != "" || s.SSLKeyPassword != "" ||
		s.SSLTrustStore != "" || s.SSLTrustStorePassword != "" || s.SSLTrustStoreType != "" || s.SSLClientAuth != tlsconfig.ClientAuthNone
}

// storeTypeKey is a server.ssl.*-store-type setting: PKCS12 or JKS.
func storeTypeKey(key, help string, field func(*Settings) *string) setting {
	return bind(key, help, field, tlsconfig.ParseStoreType, func(v string) string { return v })
}

// Scheme is the scheme of the node's advertised URLs.
func (s *Settings) Scheme() string {
	if s.TLSOn() {
		return "https"
	}
	return "http"
}

// validateSecurityTransport checks the server.ssl.* and gossip keyring
// settings that can be checked without reading files.
func (s *Settings) validateSecurityTransport() error {
	if s.TLSOn() {
		// As Spring Boot does, one source per side: PEM files or a keystore.
		switch {
		case s.SSLKeyStore != "" && (s.SSLCertificate != "" || s.SSLKey != ""):
			return errors.New("setting server.ssl.key-store: set together with server.ssl.certificate/certificate-private-key; give a keystore or PEM files, not both")
		case s.SSLTrustStore != "" && s.SSLTrust != "":
			return errors.New("setting server.ssl.trust-store: set together with server.ssl.trust-certificate; give one of them")
		case s.SSLKeyStore != "":
		case s.SSLCertificate == "":
			return errors.New("setting server.ssl.certificate: required when TLS is on (a server.ssl.* key is set and server.ssl.enabled is not false), or server.ssl.key-store")
		case s.SSLKey == "":
			return errors.New("setting server.ssl.certificate-private-key: required with server.ssl.certificate")
		}
		if s.SSLTrust == "" && s.SSLTrustStore == "" && s.SSLClientAuth != tlsconfig.ClientAuthNone {
			return fmt.Errorf("setting server.ssl.trust-certificate: required with server.ssl.client-auth = %s (client certificates are verified against it), or server.ssl.trust-store", s.SSLClientAuth)
		}
	}
	if len(s.ClusterSecretKeys) > 0 && s.ClusterSecretKey == "" {
		return errors.New("setting cluster.secret-keys: needs cluster.secret-key, the key gossip is sent with")
	}
	if _, err := cluster.ParseSecretKey(s.ClusterSecretKey); err != nil {
		return fmt.Errorf("setting cluster.secret-key: %w", err)
	}
	for i, k := range s.ClusterSecretKeys {
		if _, err := cluster.ParseSecretKey(k); err != nil {
			return fmt.Errorf("setting cluster.secret-keys[%d]: %w", i, err)
		}
	}
	return nil
}

// secretKeys decodes cluster.secret-key and cluster.secret-keys (validated
// already): the primary, then the other accepted keys.
func (s *Settings) secretKeys() (primary []byte, others [][]byte) {
	primary, _ = cluster.ParseSecretKey(s.ClusterSecretKey)
	for _, k := range s.ClusterSecretKeys {
		if key, _ := cluster.ParseSecretKey(k); key != nil {
			others = append(others, key)
		}
	}
	return primary, others
}

// tlsSettingKey names the setting of each TLS input file.
var tlsSettingKey = map[tlsconfig.File]string{
	tlsconfig.FileCertificate: "server.ssl.certificate",
	tlsconfig.FileKey:         "server.ssl.certificate-private-key",
	tlsconfig.FileTrust:       "server.ssl.trust-certificate",

	tlsconfig.FileKeyStore:           "server.ssl.key-store",
	tlsconfig.FileKeyStorePassword:   "server.ssl.key-store-password",
	tlsconfig.FileKeyAlias:           "server.ssl.key-alias",
	tlsconfig.FileKeyPassword:        "server.ssl.key-password",
	tlsconfig.FileTrustStore:         "server.ssl.trust-store",
	tlsconfig.FileTrustStorePassword: "server.ssl.trust-store-password",
}

// TLSConfig is the tlsconfig.Config of the node's server.ssl.* settings.
func (s *Settings) TLSConfig(logger zerolog.Logger, reload time.Duration) tlsconfig.Config {
	return tlsconfig.Config{
		CertFile:       s.SSLCertificate,
		KeyFile:        s.SSLKey,
		TrustFile:      s.SSLTrust,
		KeyStore:       tlsconfig.KeyStore{Path: s.SSLKeyStore, Password: s.SSLKeyStorePassword, Type: s.SSLKeyStoreType},
		KeyAlias:       s.SSLKeyAlias,
		KeyPassword:    s.SSLKeyPassword,
		TrustStore:     tlsconfig.KeyStore{Path: s.SSLTrustStore, Password: s.SSLTrustStorePassword, Type: s.SSLTrustStoreType},
		ClientAuth:     s.SSLClientAuth,
		ReloadInterval: reload,
		Logger:         logger,
	}
}

// tlsLoadError names the setting at fault; for a password or an alias,
// the keystore it belongs to (the password itself is never shown).
func tlsLoadError(err error) error {
	var fe *tlsconfig.FileError
	if !errors.As(err, &fe) {
		return err
	}
	if !fe.File.IsFile() {
		return fmt.Errorf("setting %s: %s of %s: %w", tlsSettingKey[fe.File], fe.File, fe.Path, fe.Err)
	}
	return fmt.Errorf("setting %s = %q: %s: %w", tlsSettingKey[fe.File], fe.Path, fe.File, fe.Err)
}

// loadTLS reads the node's TLS files; nil when TLS is off. Errors name the
// setting at fault. reload is how often the files are looked at again
// (0: tlsconfig's default).
func loadTLS(s *Settings, logger zerolog.Logger, reload time.Duration) (*tlsconfig.Store, error) {
	if !s.TLSOn() {
		return nil, nil
	}
	store, err := tlsconfig.Load(s.TLSConfig(logger, reload))
	if err != nil {
		return nil, tlsLoadError(err)
	}
	for _, w := range store.Check(time.Now()) {
		logger.Warn().Str("component", "tls").Msg(w)
	}
	return store, nil
}

// httpErrorLog routes net/http's own messages to the node's log: refused
// TLS handshakes (scanners, clients without a certificate, another CA) at
// debug level, since each connection makes one; the rest as warnings.
func httpErrorLog(logger zerolog.Logger) *log.Logger {
	return log.New(httpErrorWriter{logger.With().Str("component", "http").Logger()}, "", 0)
}

type httpErrorWriter struct{ log zerolog.Logger }

func (w httpErrorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		w.log.Debug().Msg(msg)
	} else {
		w.log.Warn().Msg(msg)
	}
	return len(p), nil
}
