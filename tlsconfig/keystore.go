package tlsconfig

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode/utf16"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// KeyStore names a Java keystore file, as Spring's server.ssl.key-store
// and server.ssl.trust-store (with their -password and -type) do.
type KeyStore struct {
	// Path of the file; a "file:" prefix is accepted.
	Path string
	// Password opens the store (checks its integrity and, in PKCS12,
	// decrypts it). Never logged nor put in an error.
	Password string
	// Type is StoreTypePKCS12, StoreTypeJKS or "" (Java's default
	// type). As with Java's keystore.type.compat (on by default since
	// Java 9), either type reads both formats: the file's first bytes
	// decide how it is read.
	Type string
}

// The keystore types Muster reads, in Java's spelling.
const (
	StoreTypePKCS12 = "PKCS12"
	StoreTypeJKS    = "JKS"
)

// ParseStoreType reads a server.ssl.*-store-type value: PKCS12 or JKS in
// any case, "" for none. Others (JCEKS, PKCS11, BCFKS…) are refused with
// how to convert.
func ParseStoreType(s string) (string, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "":
		return "", nil
	case "PKCS12", "P12", "PFX":
		return StoreTypePKCS12, nil
	case "JKS":
		return StoreTypeJKS, nil
	}
	return "", fmt.Errorf("tlsconfig: keystore type %q: want PKCS12 or JKS (convert with keytool -importkeystore -srckeystore FILE -destkeystore FILE.p12 -deststoretype PKCS12)", s)
}

// errWrongPassword is the answer for a store whose integrity check fails
// with the password given (or without one).
var errWrongPassword = errors.New("wrong password: the keystore's integrity check fails with it")

const (
	jksMagic   = 0xFEEDFEED
	jceksMagic = 0xCECECECE
)

// storeFormat tells PKCS12 from JKS by the first bytes, and explains
// files that are neither.
func storeFormat(data []byte) (string, error) {
	switch {
	case len(data) >= 4 && binary.BigEndian.Uint32(data) == jksMagic:
		return StoreTypeJKS, nil
	case len(data) >= 4 && binary.BigEndian.Uint32(data) == jceksMagic:
		return "", errors.New("a JCEKS keystore, which Muster does not read: convert it with keytool -importkeystore -srcstoretype JCEKS -deststoretype PKCS12")
	case bytes.Contains(data[:min(len(data), 1024)], []byte("-----BEGIN")):
		return "", errors.New("a PEM file, not a keystore: give PEM files as server.ssl.certificate, certificate-private-key and trust-certificate")
	case len(data) > 0 && data[0] == 0x30: // a DER SEQUENCE: a PFX
		return StoreTypePKCS12, nil
	}
	return "", errors.New("neither a PKCS12 nor a JKS keystore")
}

// keyStoreInputs is what decodeKeyPair needs besides the bytes.
type keyStoreInputs struct {
	store       KeyStore
	alias       string // "" when not set
	keyPassword string // "" when not set: the store's password is used, as in Spring
}

// decodeKeyPair reads the node's key and certificate chain from a
// keystore. Errors are *FileError values naming the input at fault.
func decodeKeyPair(data []byte, in keyStoreInputs) (*tls.Certificate, error) {
	path := in.store.Path
	format, err := storeFormat(data)
	if err != nil {
		return nil, &FileError{File: FileKeyStore, Path: path, Err: err}
	}
	var pair *tls.Certificate
	if format == StoreTypeJKS {
		pair, err = decodeJKSKeyPair(data, in)
	} else {
		pair, err = decodePKCS12KeyPair(data, in)
	}
	if err != nil {
		return nil, err
	}
	return pair, nil
}

func decodeJKSKeyPair(data []byte, in keyStoreInputs) (*tls.Certificate, error) {
	path := in.store.Path
	ks := keystore.New()
	if err := ks.Load(bytes.NewReader(data), []byte(in.store.Password)); err != nil {
		if strings.Contains(err.Error(), "invalid digest") {
			return nil, &FileError{File: FileKeyStorePassword, Path: path, Err: errWrongPassword}
		}
		return nil, &FileError{File: FileKeyStore, Path: path, Err: fmt.Errorf("not a JKS keystore that reads: %v", err)}
	}
	var keys, trusted []string
	for _, a := range ks.Aliases() {
		if ks.IsPrivateKeyEntry(a) {
			keys = append(keys, a)
		} else if ks.IsTrustedCertificateEntry(a) {
			trusted = append(trusted, a)
		}
	}
	alias, err := pickAlias(keys, trusted, in.alias)
	if err != nil {
		return nil, &FileError{File: FileKeyAlias, Path: path, Err: err}
	}
	password, passwordInput := in.keyPassword, FileKeyPassword
	if password == "" {
		password = in.store.Password
	}
	entry, err := ks.GetPrivateKeyEntry(alias, []byte(password))
	if err != nil {
		if in.keyPassword == "" {
			return nil, &FileError{File: passwordInput, Path: path, Err: fmt.Errorf("not set, and the key store's password does not decrypt key %q: it has a key password of its own", alias)}
		}
		return nil, &FileError{File: passwordInput, Path: path, Err: fmt.Errorf("does not decrypt key %q", alias)}
	}
	key, err := x509.ParsePKCS8PrivateKey(entry.PrivateKey)
	if err != nil {
		return nil, &FileError{File: FileKeyStore, Path: path, Err: fmt.Errorf("key %q: %v", alias, err)}
	}
	var chain []*x509.Certificate
	for i, c := range entry.CertificateChain {
		cert, err := x509.ParseCertificate(c.Content)
		if err != nil {
			return nil, &FileError{File: FileKeyStore, Path: path, Err: fmt.Errorf("key %q: certificate %d of its chain: %v", alias, i, err)}
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 {
		return nil, &FileError{File: FileKeyStore, Path: path, Err: fmt.Errorf("key %q has no certificate", alias)}
	}
	if !publicKeyMatches(chain[0], key) {
		return nil, &FileError{File: FileKeyStore, Path: path, Err: fmt.Errorf("key %q does not belong to the first certificate of its chain", alias)}
	}
	return certificate(key, chain), nil
}

func decodePKCS12KeyPair(data []byte, in keyStoreInputs) (*tls.Certificate, error) {
	path := in.store.Path
	// The key bags' aliases (friendlyName) sit outside the encrypted
	// parts in the files keytool and openssl write, so they are read
	// before anything is decrypted.
	keys := pkcs12KeyAliases(data)
	key, leaf, others, err := pkcs12.DecodeChain(data, in.store.Password)
	switch {
	case errors.Is(err, pkcs12.ErrIncorrectPassword):
		return nil, &FileError{File: FileKeyStorePassword, Path: path, Err: errWrongPassword}
	case err != nil && strings.Contains(err.Error(), "exactly one key bag"):
		return nil, &FileError{File: FileKeyStore, Path: path, Err: fmt.Errorf("holds several private keys (%s): Muster reads PKCS12 keystores with one; copy the one to serve into its own store with keytool -importkeystore -srckeystore %s -srcalias ALIAS -destkeystore node.p12, or use JKS",
			strings.Join(keys, ", "), path)}
	case errors.Is(err, pkcs12.ErrDecryption):
		return nil, &FileError{File: FileKeyPassword, Path: path, Err: errors.New("the key does not decrypt with the key store's password (a PKCS12 store has one password, as keytool makes it)")}
	case err != nil:
		return nil, &FileError{File: FileKeyStore, Path: path, Err: fmt.Errorf("not a PKCS12 keystore that reads: %v", err)}
	}
	if in.alias != "" && len(keys) > 0 {
		if _, err := pickAlias(keys, nil, in.alias); err != nil {
			return nil, &FileError{File: FileKeyAlias, Path: path, Err: err}
		}
	}
	// DecodeChain returns the certificates in file order: the leaf is the
	// one of the key, the chain what issued it, and trusted certificates
	// kept beside the key are not part of it.
	all := append([]*x509.Certificate{leaf}, others...)
	leaf = nil
	for _, c := range all {
		if publicKeyMatches(c, key) {
			leaf = c
			break
		}
	}
	if leaf == nil {
		return nil, &FileError{File: FileKeyStore, Path: path, Err: errors.New("no certificate for its private key")}
	}
	return certificate(key, chainOf(leaf, all)), nil
}

// pickAlias finds the key entry to serve: alias when set (any case, as
// Java's keystores compare them), else the only key entry.
func pickAlias(keys, trusted []string, alias string) (string, error) {
	present := func() string {
		s := "key entries: " + orNone(keys)
		if len(trusted) > 0 {
			s += "; trusted certificates: " + strings.Join(trusted, ", ")
		}
		return s
	}
	if alias == "" {
		switch len(keys) {
		case 0:
			return "", fmt.Errorf("not set, and the store holds no private key (%s)", present())
		case 1:
			return keys[0], nil
		}
		return "", fmt.Errorf("not set, and the store holds several private keys: name one (%s)", present())
	}
	for _, k := range keys {
		if strings.EqualFold(k, alias) {
			return k, nil
		}
	}
	for _, k := range trusted {
		if strings.EqualFold(k, alias) {
			return "", fmt.Errorf("%q is a trusted certificate, not a private key (%s)", alias, present())
		}
	}
	return "", fmt.Errorf("no entry %q in the store (%s)", alias, present())
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// chainOf is leaf followed by its issuers among certs, as far as they go.
func chainOf(leaf *x509.Certificate, certs []*x509.Certificate) []*x509.Certificate {
	chain := []*x509.Certificate{leaf}
	for cur := leaf; len(chain) <= len(certs); {
		if bytes.Equal(cur.RawIssuer, cur.RawSubject) {
			break // self-signed: the end
		}
		var next *x509.Certificate
		for _, c := range certs {
			if c != cur && bytes.Equal(c.RawSubject, cur.RawIssuer) && cur.CheckSignatureFrom(c) == nil {
				next = c
				break
			}
		}
		if next == nil {
			break
		}
		chain = append(chain, next)
		cur = next
	}
	return chain
}

func certificate(key crypto.PrivateKey, chain []*x509.Certificate) *tls.Certificate {
	c := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, x := range chain {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return c
}

// publicKeyMatches tells whether key is the private key of cert.
func publicKeyMatches(cert *x509.Certificate, key crypto.PrivateKey) bool {
	signer, ok := key.(crypto.Signer)
	if !ok {
		return false
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(signer.Public())
}

// ReadTrustStore reads the certificates a PKCS12 or JKS trust store
// vouches for, as server.ssl.trust-store does (see decodeTrustStore), for
// a client that verifies servers against them (a remote region's fetcher).
// A "file:" prefix is accepted; the file's first bytes decide its format,
// whatever store.Type says. Errors are *FileError and never hold the
// password.
func ReadTrustStore(store KeyStore) ([]*x509.Certificate, error) {
	store.Path = stripFilePrefix(store.Path)
	data, err := os.ReadFile(store.Path)
	if err != nil {
		return nil, &FileError{File: FileTrustStore, Path: store.Path, Err: unwrapPath(err)}
	}
	return decodeTrustStore(data, store)
}

// decodeTrustStore reads the certificates a trust store vouches for: as
// Java's trust managers do, its trusted certificate entries and the
// certificates of its key entries (a node's own keystore often serves as
// the trust store too).
func decodeTrustStore(data []byte, store KeyStore) ([]*x509.Certificate, error) {
	path := store.Path
	format, err := storeFormat(data)
	if err != nil {
		return nil, &FileError{File: FileTrustStore, Path: path, Err: err}
	}
	var certs []*x509.Certificate
	if format == StoreTypeJKS {
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(data), []byte(store.Password)); err != nil {
			// Without a password Java reads a JKS trust store without
			// checking its integrity; so does Muster.
			if !strings.Contains(err.Error(), "invalid digest") {
				return nil, &FileError{File: FileTrustStore, Path: path, Err: fmt.Errorf("not a JKS keystore that reads: %v", err)}
			}
			if store.Password != "" {
				return nil, &FileError{File: FileTrustStorePassword, Path: path, Err: errWrongPassword}
			}
		}
		for _, a := range ks.Aliases() {
			var der []byte
			if e, err := ks.GetTrustedCertificateEntry(a); err == nil {
				der = e.Certificate.Content
			} else if chain, err := ks.GetPrivateKeyEntryCertificateChain(a); err == nil && len(chain) > 0 {
				der = chain[0].Content
			}
			if c, err := x509.ParseCertificate(der); err == nil {
				certs = append(certs, c)
			}
		}
	} else {
		certs, err = pkcs12.DecodeTrustStore(data, store.Password)
		if errors.Is(err, pkcs12.ErrIncorrectPassword) {
			return nil, &FileError{File: FileTrustStorePassword, Path: path, Err: errWrongPassword}
		}
		if err != nil {
			// A keystore with a key (and maybe trusted certificates):
			// every certificate in it is trusted.
			_, leaf, others, err2 := pkcs12.DecodeChain(data, store.Password)
			if err2 != nil {
				return nil, &FileError{File: FileTrustStore, Path: path, Err: fmt.Errorf("not a PKCS12 trust store that reads: %v", err)}
			}
			certs = append([]*x509.Certificate{leaf}, others...)
		}
	}
	if len(certs) == 0 {
		return nil, &FileError{File: FileTrustStore, Path: path, Err: errors.New("holds no certificate")}
	}
	return certs, nil
}

// The parts of PKCS #12 (RFC 7292) needed to list the key bags' aliases.
type pfxOuter struct {
	Version  int
	AuthSafe contentInfo
	MacData  asn1.RawValue `asn1:"optional"`
}

type contentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue `asn1:"tag:0,explicit,optional"`
}

type safeBag struct {
	ID         asn1.ObjectIdentifier
	Value      asn1.RawValue  `asn1:"tag:0,explicit"`
	Attributes []bagAttribute `asn1:"set,optional"`
}

type bagAttribute struct {
	ID     asn1.ObjectIdentifier
	Values asn1.RawValue `asn1:"set"`
}

var (
	oidData                = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidKeyBag              = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 1}
	oidShroudedKeyBag      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 2}
	oidFriendlyName        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 20}
	errNotPlainPKCS12Layer = errors.New("not a plain PKCS12 layer")
)

// pkcs12KeyAliases lists the friendly names of the key bags that are not
// inside an encrypted safe, sorted; nil when there are none or the file
// is laid out otherwise (then the alias cannot be checked).
func pkcs12KeyAliases(data []byte) []string {
	var pfx pfxOuter
	if _, err := asn1.Unmarshal(data, &pfx); err != nil || !pfx.AuthSafe.ContentType.Equal(oidData) {
		return nil
	}
	authSafe, err := octets(pfx.AuthSafe.Content)
	if err != nil {
		return nil
	}
	var safes []contentInfo
	if _, err := asn1.Unmarshal(authSafe, &safes); err != nil {
		return nil
	}
	var aliases []string
	for _, ci := range safes {
		if !ci.ContentType.Equal(oidData) {
			continue // encrypted: certificates, in keytool's and openssl's files
		}
		contents, err := octets(ci.Content)
		if err != nil {
			continue
		}
		var bags []safeBag
		if _, err := asn1.Unmarshal(contents, &bags); err != nil {
			continue
		}
		for _, b := range bags {
			if !b.ID.Equal(oidShroudedKeyBag) && !b.ID.Equal(oidKeyBag) {
				continue
			}
			for _, a := range b.Attributes {
				if a.ID.Equal(oidFriendlyName) {
					if name, ok := bmpString(a.Values.Bytes); ok {
						aliases = append(aliases, name)
					}
				}
			}
		}
	}
	sort.Strings(aliases)
	return aliases
}

// octets is the content of an OCTET STRING held by an explicit [0].
func octets(v asn1.RawValue) ([]byte, error) {
	var b []byte
	if _, err := asn1.Unmarshal(v.FullBytes, &b); err == nil {
		return b, nil
	}
	if _, err := asn1.Unmarshal(v.Bytes, &b); err == nil {
		return b, nil
	}
	return nil, errNotPlainPKCS12Layer
}

// bmpString decodes one DER BMPString (UTF-16BE), the type of PKCS12's
// friendlyName.
func bmpString(der []byte) (string, bool) {
	var raw asn1.RawValue
	if _, err := asn1.Unmarshal(der, &raw); err != nil || raw.Tag != asn1.TagBMPString || len(raw.Bytes)%2 != 0 {
		return "", false
	}
	u := make([]uint16, len(raw.Bytes)/2)
	for i := range u {
		u[i] = binary.BigEndian.Uint16(raw.Bytes[2*i:])
	}
	return string(utf16.Decode(u)), true
}
