package settings

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/muster-registry/muster/tlsconfig"
)

func TestSettings_TLS(t *testing.T) {
	key32 := base64.StdEncoding.EncodeToString(make([]byte, 32))
	key32b := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("b", 32)))
	for _, tc := range []struct {
		sets []string
		want string // error text; "" = valid
		on   bool
	}{
		{nil, "", false},
		{[]string{"server.ssl.enabled=true"}, "setting server.ssl.certificate: required", false},
		{[]string{"server.ssl.certificate=/c.pem"}, "setting server.ssl.certificate-private-key: required", false},
		{[]string{"server.ssl.certificate=/c.pem", "server.ssl.certificate-private-key=/k.pem"}, "", true},
		{[]string{"server.ssl.certificate=/c.pem", "server.ssl.certificate-private-key=/k.pem", "server.ssl.client-auth=NEED"}, "setting server.ssl.trust-certificate: required with server.ssl.client-auth = need", false},
		{[]string{"server.ssl.certificate=/c.pem", "server.ssl.certificate-private-key=/k.pem", "server.ssl.client-auth=sometimes"}, "server.ssl.client-auth", false},
		{[]string{"server.ssl.enabled=false", "server.ssl.certificate=/c.pem"}, "", false},
		{[]string{"cluster.secret-keys=" + key32}, "setting cluster.secret-keys: needs cluster.secret-key", false},
		{[]string{"cluster.secret-key=" + key32, "cluster.secret-keys=" + key32b + ",bad"}, "setting cluster.secret-keys[1]", false},
		{[]string{"cluster.secret-key=short"}, "setting cluster.secret-key", false},
	} {
		s, _, err := LoadSettings("", nil, tc.sets)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.sets, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: err = %v, want %q", tc.sets, err, tc.want)
		case err == nil && s.TLSOn() != tc.on:
			t.Errorf("%v: TLS on = %v, want %v", tc.sets, s.TLSOn(), tc.on)
		}
	}
	// Spring's environment names work too.
	s, _, err := LoadSettings("", []string{"SERVER_SSL_CERTIFICATE=/c.pem", "SERVER_SSL_CERTIFICATEPRIVATEKEY=/k.pem", "SERVER_SSL_CLIENT_AUTH=want", "SERVER_SSL_TRUST_CERTIFICATE=/ca.pem"}, nil)
	if err != nil || !s.TLSOn() || s.SSLClientAuth != tlsconfig.ClientAuthWant || s.SSLTrust != "/ca.pem" {
		t.Errorf("from the environment: %+v, %v", s, err)
	}
}

func TestSettings_TLS_keyStore(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string // error text; "" = valid
	}{
		{[]string{"server.ssl.key-store=/n.p12"}, ""},
		{[]string{"server.ssl.key-store=/n.p12", "server.ssl.client-auth=need"}, "setting server.ssl.trust-certificate: required with server.ssl.client-auth = need (client certificates are verified against it), or server.ssl.trust-store"},
		{[]string{"server.ssl.key-store=/n.p12", "server.ssl.trust-store=/t.jks", "server.ssl.client-auth=need"}, ""},
		{[]string{"server.ssl.certificate=/c.pem", "server.ssl.certificate-private-key=/k.pem", "server.ssl.trust-store=/t.jks", "server.ssl.client-auth=want"}, ""},
		{[]string{"server.ssl.key-store=/n.p12", "server.ssl.certificate=/c.pem"}, "setting server.ssl.key-store: set together with server.ssl.certificate"},
		{[]string{"server.ssl.key-store=/n.p12", "server.ssl.trust-store=/t.jks", "server.ssl.trust-certificate=/ca.pem"}, "setting server.ssl.trust-store: set together with server.ssl.trust-certificate"},
		{[]string{"server.ssl.key-store=/n.p12", "server.ssl.key-store-type=JCEKS"}, "server.ssl.key-store-type"},
		{[]string{"server.ssl.key-store=/n.p12", "server.ssl.trust-store-type=BKS"}, "server.ssl.trust-store-type"},
		{[]string{"server.ssl.key-alias=node"}, "setting server.ssl.certificate: required"},
	} {
		s, _, err := LoadSettings("", nil, tc.sets)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.sets, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: err = %v, want %q", tc.sets, err, tc.want)
		case err == nil && !s.TLSOn():
			t.Errorf("%v: TLS off", tc.sets)
		}
	}
	// Spring's environment names, as a container would set them.
	s, _, err := LoadSettings("", []string{"SERVER_SSL_KEY_STORE=/n.jks", "SERVER_SSL_KEYSTOREPASSWORD=pw", "SERVER_SSL_KEY_STORE_TYPE=jks",
		"SERVER_SSL_KEY_ALIAS=node", "SERVER_SSL_KEY_PASSWORD=kp", "SERVER_SSL_TRUST_STORE=/t.p12", "SERVER_SSL_TRUST_STORE_PASSWORD=tp",
		"SERVER_SSL_TRUST_STORE_TYPE=PKCS12"}, nil)
	if err != nil || s.SSLKeyStore != "/n.jks" || s.SSLKeyStorePassword != "pw" || s.SSLKeyStoreType != "JKS" || s.SSLKeyAlias != "node" ||
		s.SSLKeyPassword != "kp" || s.SSLTrustStore != "/t.p12" || s.SSLTrustStorePassword != "tp" || s.SSLTrustStoreType != "PKCS12" {
		t.Errorf("from the environment: %v, %+v", err, s)
	}
}
