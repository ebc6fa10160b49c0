package settings

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/muster-registry/muster/tlsconfig"
)

// RegionTrustPool reads the CA certificates HTTPS remote regions are
// verified against: a PEM bundle, or a Java trust store (PKCS12 or JKS,
// told apart by its first bytes, opened with password), as Eureka's
// remote-region-trust-store is.
func RegionTrustPool(path, password string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !bytes.Contains(b, []byte("-----BEGIN")) {
		certs, err := tlsconfig.ReadTrustStore(tlsconfig.KeyStore{Path: path, Password: password})
		if err != nil {
			return nil, err
		}
		for _, c := range certs {
			pool.AddCert(c)
		}
		return pool, nil
	}
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
