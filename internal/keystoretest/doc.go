// Package keystoretest gives tests Java keystores: made at test time by
// the JDK's keytool, as a Spring team makes them, or the ones committed in
// its testdata (made the same way) where keytool is absent.
//
// The set: a CA (ca.pem), the node's key with the CA's chain and the CA as
// a trusted entry in PKCS12 (node.p12, Java 17's PBES2/AES) and in JKS
// with a key password of its own (node.jks), the node's key in a legacy
// PKCS12 (legacy.p12: RC2 and 3DES, as Java 8 wrote them), a client's key
// (client.p12), trust stores holding only the CA (trust.p12, trust.jks),
// and a PKCS12 with two keys (twokeys.p12). Every certificate is for
// 127.0.0.1 and localhost, for server and client use, valid from 2020 for 100 years.
package keystoretest
