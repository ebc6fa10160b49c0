package keystoretest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The passwords of the set.
const (
	StorePassword  = "changeit"  // node.p12, client.p12, legacy.p12, twokeys.p12
	JKSPassword    = "storepass" // node.jks
	JKSKeyPassword = "keypass"   // the node's key in node.jks
	TrustPassword  = "trustpass" // trust.p12, trust.jks
	caPassword     = "capass"    // the CA's own store, not kept
)

// Set is a directory holding the keystores.
type Set struct{ Dir string }

// Path is the file name in the set.
func (s Set) Path(name string) string { return filepath.Join(s.Dir, name) }

// Fixtures is the committed set (testdata, made by Make with -update).
func Fixtures() Set {
	_, file, _, _ := runtime.Caller(0)
	return Set{Dir: filepath.Join(filepath.Dir(file), "testdata")}
}

// Sets is the committed set and, where keytool runs, one made now: tests
// ranging over it check what the committed files were made from too.
func Sets(tb testing.TB) map[string]Set {
	tb.Helper()
	sets := map[string]Set{"committed": Fixtures()}
	if _, err := exec.LookPath("keytool"); err != nil {
		tb.Logf("keytool not found (%v): only the committed keystores are tested", err)
		return sets
	}
	sets["keytool"] = Make(tb, tb.TempDir())
	return sets
}

// Make writes the set into dir with keytool; the test is skipped when
// keytool is absent.
func Make(tb testing.TB, dir string) Set {
	tb.Helper()
	if _, err := exec.LookPath("keytool"); err != nil {
		tb.Skipf("keytool (a JDK) not found: %v", err)
	}
	s := Set{Dir: dir}
	kt := func(stdin []byte, args ...string) []byte {
		tb.Helper()
		cmd := exec.Command("keytool", args...)
		cmd.Dir = dir
		cmd.Stdin = bytes.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			tb.Fatalf("keytool %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.Bytes()
	}
	// Valid from 2020 for 100 years: the committed files work on any
	// machine whose clock is roughly right.
	const validity, startDate = "36500", "2020/01/01 00:00:00"
	ec := []string{"-keyalg", "EC", "-groupname", "secp256r1", "-validity", validity, "-startdate", startDate}
	kt(nil, append([]string{"-genkeypair", "-alias", "ca", "-dname", "CN=Keystore Test CA", "-ext", "bc:c",
		"-keystore", "ca.p12", "-storetype", "PKCS12", "-storepass", caPassword}, ec...)...)
	ca := kt(nil, "-exportcert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-storepass", caPassword)
	if err := os.WriteFile(s.Path("ca.pem"), ca, 0o644); err != nil {
		tb.Fatal(err)
	}
	for _, name := range []string{"node", "client"} {
		store := name + ".p12"
		kt(nil, append([]string{"-genkeypair", "-alias", name, "-dname", "CN=" + name,
			"-keystore", store, "-storetype", "PKCS12", "-storepass", StorePassword}, ec...)...)
		req := kt(nil, "-certreq", "-alias", name, "-keystore", store, "-storepass", StorePassword)
		signed := kt(req, "-gencert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-storepass", caPassword,
			"-ext", "san=ip:127.0.0.1,dns:localhost", "-ext", "eku=serverAuth,clientAuth", "-validity", validity, "-startdate", startDate)
		kt(nil, "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", store, "-storepass", StorePassword)
		kt(signed, "-importcert", "-noprompt", "-alias", name, "-keystore", store, "-storepass", StorePassword)
	}
	kt(nil, "-importkeystore", "-noprompt", "-srckeystore", "node.p12", "-srcstorepass", StorePassword, "-srcalias", "node",
		"-destkeystore", "node.jks", "-deststoretype", "JKS", "-deststorepass", JKSPassword, "-destkeypass", JKSKeyPassword)
	kt(nil, "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", "node.jks", "-storepass", JKSPassword)
	kt(nil, "-J-Dkeystore.pkcs12.legacy", "-importkeystore", "-noprompt", "-srckeystore", "node.p12", "-srcstorepass", StorePassword,
		"-srcalias", "node", "-destkeystore", "legacy.p12", "-deststoretype", "PKCS12", "-deststorepass", StorePassword)
	for file, typ := range map[string]string{"trust.p12": "PKCS12", "trust.jks": "JKS"} {
		kt(nil, "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", file, "-storetype", typ, "-storepass", TrustPassword)
	}
	kt(nil, "-importkeystore", "-noprompt", "-srckeystore", "node.p12", "-srcstorepass", StorePassword,
		"-destkeystore", "twokeys.p12", "-deststoretype", "PKCS12", "-deststorepass", StorePassword)
	kt(nil, "-importkeystore", "-noprompt", "-srckeystore", "client.p12", "-srcstorepass", StorePassword, "-srcalias", "client",
		"-destkeystore", "twokeys.p12", "-deststoretype", "PKCS12", "-deststorepass", StorePassword)
	if err := os.Remove(s.Path("ca.p12")); err != nil {
		tb.Fatal(err)
	}
	return s
}

// ServerSettings are the server.ssl.* settings of a node serving with
// nodeStore (a copy of the set's node.p12, or the set's own) and trusting
// the set's trust.jks with client-auth need: Spring Boot's keystore
// configuration as a node's tests write it.
func (s Set) ServerSettings(nodeStore string) []string {
	return []string{
		"server.ssl.key-store=file:" + nodeStore,
		"server.ssl.key-store-password=" + StorePassword,
		"server.ssl.key-store-type=PKCS12",
		"server.ssl.key-alias=node",
		"server.ssl.trust-store=" + s.Path("trust.jks"),
		"server.ssl.trust-store-password=" + TrustPassword,
		"server.ssl.trust-store-type=JKS",
		"server.ssl.client-auth=need",
	}
}
