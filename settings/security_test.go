package settings

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

const testSecret = "cluster-peer-secret-0123456789"

func TestLoadSettings_security(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "application.yml", `
spring:
  security:
    user:
      name: admin
      password: "{bcrypt}`+string(hash)+`"
muster:
  auth:
    users:
      orders-team:
        password: "{noop}team"
        role: write
        apps: [ORDERS, orders-worker]
      prometheus:
        password: scrape
        role: read
cluster:
  peer-secret: `+testSecret+`
`)
	s := mustLoad(t, file, nil, nil)
	users, err := s.Users()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range users {
		got = append(got, fmt.Sprintf("%s:%s:%v", u.Name, u.Role, u.Apps()))
	}
	if want := "admin:admin:[] orders-team:write:[ORDERS ORDERS-WORKER] prometheus:read:[]"; strings.Join(got, " ") != want {
		t.Errorf("users = %v, want %s", got, want)
	}
	if s.PeerMaxClockSkew != 30*time.Second {
		t.Errorf("default skew = %v", s.PeerMaxClockSkew)
	}

	env := []string{"SPRING_SECURITY_USER_NAME=boss", "SPRING_SECURITY_USER_PASSWORD=pw",
		"MUSTER_AUTH_USERS_ALICE_PASSWORD=a", "MUSTER_AUTH_USERS_ALICE_ROLE=read", "CLUSTER_PEER_SECRET=" + testSecret}
	s = mustLoad(t, "", env, nil)
	users, err = s.Users()
	if err != nil || len(users) != 2 || users[0].Name != "boss" || users[1].Name != "alice" {
		t.Fatalf("users from the environment: %v %v", users, err)
	}
}

// A file with a password and no peer secret starts as a Spring Eureka
// server would: gossip off (said once, as a warning), static peers kept.
func TestLoadSettings_authWithoutPeerSecretTurnsGossipOff(t *testing.T) {
	s, notices, err := LoadSettings("", nil, []string{"spring.security.user.name=admin", "spring.security.user.password=pw",
		"eureka.client.service-url.defaultZone=http://admin:pw@peer-b:8761/eureka/"})
	if err != nil {
		t.Fatal(err)
	}
	if s.ClusterEnabled || len(s.ServiceURLs["defaultZone"]) != 1 {
		t.Fatalf("cluster.enabled %v, static peers %v; want gossip off and the peer kept", s.ClusterEnabled, s.ServiceURLs)
	}
	if o := s.origin["cluster.enabled"]; !strings.Contains(o, "no cluster.peer-secret") {
		t.Errorf("config --check would show cluster.enabled's origin as %q, not why it is off", o)
	}
	var said int
	for _, n := range notices {
		if n.Warn && strings.Contains(n.Msg, "gossip clustering is off") {
			said++
			if strings.Contains(n.Msg, "pw") {
				t.Errorf("the warning repeats a password: %s", n.Msg)
			}
		}
	}
	if said != 1 {
		t.Fatalf("%d warnings about gossip, want 1: %+v", said, notices)
	}
}

// Bad security settings stop start-up with a message that names the key
// and never repeats a password.
func TestLoadSettings_securityErrors(t *testing.T) {
	auth := []string{"spring.security.user.name=admin", "spring.security.user.password=pw"}
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{append(auth, "cluster.enabled=true"), "setting cluster.peer-secret is required"},
		{[]string{"spring.security.user.name=admin", "cluster.enabled=false"}, "spring.security.user.password is empty"},
		{append(auth, "cluster.enabled=false", "spring.security.user.password={bcrypt}$2a$10$notahash-Xyz"), "setting spring.security.user.password: auth: unusable password encoding"},
		{append(auth, "cluster.enabled=false", "spring.security.user.password={md5}Xyz-secret"), "password encoder {md5} is not supported"},
		{append(auth, "cluster.peer-secret=short"), "setting cluster.peer-secret: must be at least 16"},
		{append(auth, "cluster.enabled=false", "muster.auth.users.bob.password=Xyz-secret"), "setting muster.auth.users.bob.role is missing"},
		{append(auth, "cluster.enabled=false", "muster.auth.users.bob.role=read"), "setting muster.auth.users.bob.password is missing"},
		{append(auth, "cluster.enabled=false", "muster.auth.users.bob.password=Xyz-secret", "muster.auth.users.bob.role=root"), "setting muster.auth.users.bob.role = \"root\""},
		{append(auth, "cluster.enabled=false", "muster.auth.users.bob.password=Xyz-secret", "muster.auth.users.bob.role=read", "muster.auth.users.bob.apps=ORDERS"), "setting muster.auth.users.bob.apps: an apps list only limits a write user"},
		{append(auth, "cluster.enabled=false", "muster.auth.users.bob.colour=red"), "unknown setting \"muster.auth.users.bob.colour\""},
		{append(auth, "cluster.enabled=false", "muster.auth.users.admin.password=x", "muster.auth.users.admin.role=read"), "admin is already spring.security.user.name"},
	} {
		_, _, err := LoadSettings("", nil, tc.sets)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sets %v: error %v, want one containing %q", tc.sets, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "Xyz-secret") || strings.Contains(err.Error(), "notahash") {
			t.Errorf("error repeats a password: %v", err)
		}
	}
	// Peer secret alone, or auth with the cluster off, are fine.
	mustLoad(t, "", nil, []string{"cluster.peer-secret=" + testSecret})
	mustLoad(t, "", nil, append(auth, "cluster.enabled=false"))
}

// TestLoadSettings_springBootDefaultUser: a password alone is Spring
// Boot's user "user", with Boot 2's key and Boot 1's.
func TestLoadSettings_springBootDefaultUser(t *testing.T) {
	for _, key := range []string{"spring.security.user.password", "security.user.password"} {
		s, rep, err := Load(LoadRequest{Sets: []string{key + "=pw-secret", "cluster.enabled=false"}})
		if err != nil {
			t.Fatalf("%s alone: %v", key, err)
		}
		users, err := s.Users()
		if err != nil || len(users) != 1 || users[0].Name != "user" {
			t.Errorf("%s alone: users %v, %v; want user", key, users, err)
		}
		found := false
		for _, row := range EffectiveSettings(s, rep) {
			if row[0] == "spring.security.user.name" && row[1] == "user" && strings.Contains(row[2], "Spring Boot") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s alone: config --check does not show user from Spring Boot's default", key)
		}
	}
}
