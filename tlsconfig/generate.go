package tlsconfig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CAOptions describe a new certificate authority.
type CAOptions struct {
	CommonName string        // default "Muster CA"
	Validity   time.Duration // default 5 years
	Now        time.Time     // default time.Now()
}

// CertOptions describe a certificate signed by a CA.
type CertOptions struct {
	// Name is the certificate's common name, e.g. node-a.
	Name string
	// DNSNames and IPs are the subject alternative names clients check
	// against the host they dialled. With neither, Name is used.
	DNSNames []string
	IPs      []net.IP
	Validity time.Duration // default 1 year
	Now      time.Time     // default time.Now()
	// CACert and CAKey are the signing CA, PEM (as NewCA writes them).
	CACert, CAKey []byte
}

// NewCA makes a self-signed ECDSA P-256 CA that may sign certificates but
// no further CAs. It returns the certificate and the PKCS#8 key as PEM.
func NewCA(o CAOptions) (certPEM, keyPEM []byte, err error) {
	if o.CommonName == "" {
		o.CommonName = "Muster CA"
	}
	if o.Validity <= 0 {
		o.Validity = 5 * 365 * 24 * time.Hour
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := template(o.CommonName, o.Now, o.Validity, key.Public())
	if err != nil {
		return nil, nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

// NewCert makes an ECDSA P-256 certificate for o.Name, signed by the CA,
// usable both as a server and as a client certificate (serverAuth and
// clientAuth), so one file serves a node's listener and its calls to
// peers.
func NewCert(o CertOptions) (certPEM, keyPEM []byte, err error) {
	if o.Name == "" {
		return nil, nil, errors.New("tlsconfig: certificate name is empty")
	}
	if o.Validity <= 0 {
		o.Validity = 365 * 24 * time.Hour
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	ca, caKey, err := parseCA(o.CACert, o.CAKey)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := template(o.Name, o.Now, o.Validity, key.Public())
	if err != nil {
		return nil, nil, err
	}
	tmpl.DNSNames, tmpl.IPAddresses = o.DNSNames, o.IPs
	if len(o.DNSNames) == 0 && len(o.IPs) == 0 {
		if ip := net.ParseIP(o.Name); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		} else {
			tmpl.DNSNames = []string{o.Name}
		}
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.AuthorityKeyId = ca.SubjectKeyId
	if tmpl.NotAfter.After(ca.NotAfter) {
		// A certificate cannot outlive its CA in any verifier's eyes.
		tmpl.NotAfter = ca.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

func template(cn string, now time.Time, validity time.Duration, pub crypto.PublicKey) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	ski := sha1.Sum(spki) // RFC 5280 §4.2.1.2 method 1 uses SHA-1 for the key identifier
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject(cn),
		NotBefore:    now.Add(-time.Minute), // a little slack for peers' clocks
		NotAfter:     now.Add(validity),
		SubjectKeyId: ski[:],
	}, nil
}

func subject(cn string) pkix.Name { return pkix.Name{CommonName: cn, Organization: []string{"Muster"}} }

func encode(der []byte, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	k, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k}), nil
}

func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("tlsconfig: CA certificate: no PEM CERTIFICATE block")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconfig: CA certificate: %w", err)
	}
	if !ca.IsCA {
		return nil, nil, errors.New("tlsconfig: CA certificate is not a CA")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("tlsconfig: CA key: no PEM block")
	}
	var key any
	switch kb.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
	default:
		err = fmt.Errorf("PEM block %q is not a private key", kb.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconfig: CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("tlsconfig: CA key cannot sign")
	}
	if pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(ca.PublicKey) {
		return nil, nil, errors.New("tlsconfig: CA key does not belong to the CA certificate")
	}
	return ca, signer, nil
}
