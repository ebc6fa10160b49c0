package auth_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/muster-registry/muster/auth"
)

func mustUser(t *testing.T, name, password string, role auth.Role, apps ...string) *auth.User {
	t.Helper()
	u, err := auth.NewUser(name, password, role, apps)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func bcryptOf(t *testing.T, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return "{bcrypt}" + string(h)
}

func TestAuthenticator_Authenticate_encodings(t *testing.T) {
	a, err := auth.NewAuthenticator(
		mustUser(t, "plain", "s3cret", auth.RoleAdmin),
		mustUser(t, "noop", "{noop}s3cret", auth.RoleRead),
		mustUser(t, "hashed", bcryptOf(t, "s3cret"), auth.RoleWrite),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, pw string
		want     auth.Failure
	}{
		{"plain", "s3cret", auth.FailureNone},
		{"plain", "s3cret ", auth.FailureBadPassword},
		{"plain", "", auth.FailureBadPassword},
		{"noop", "s3cret", auth.FailureNone},
		{"noop", "{noop}s3cret", auth.FailureBadPassword},
		{"hashed", "s3cret", auth.FailureNone},
		{"hashed", "wrong", auth.FailureBadPassword},
		{"hashed", bcryptOf(t, "s3cret"), auth.FailureBadPassword},
		{"nobody", "s3cret", auth.FailureUnknownUser},
		{"", "", auth.FailureUnknownUser},
	} {
		u, f := a.Authenticate(tc.user, tc.pw)
		if f != tc.want {
			t.Errorf("Authenticate(%q, %q) = %q, want %q", tc.user, tc.pw, f, tc.want)
		}
		if (f == auth.FailureNone) != (u != nil) {
			t.Errorf("Authenticate(%q, %q): user %v with failure %q", tc.user, tc.pw, u, f)
		}
	}
}

// bcrypt is slow by design; a heartbeat every 30 s per instance must not
// pay it. After one successful check the password is recognised from the
// cache; a wrong one is still checked (and refused) every time.
func TestAuthenticator_Authenticate_bcryptCached(t *testing.T) {
	a, err := auth.NewAuthenticator(mustUser(t, "svc", bcryptOf(t, "right"), auth.RoleWrite))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, f := a.Authenticate("svc", "right"); f != auth.FailureNone {
				t.Errorf("right password refused: %s", f)
			}
		}()
	}
	wg.Wait()
	afterFirst := a.BcryptChecks()
	for i := 0; i < 100; i++ {
		if _, f := a.Authenticate("svc", "right"); f != auth.FailureNone {
			t.Fatalf("right password refused: %s", f)
		}
	}
	if got := a.BcryptChecks(); got != afterFirst {
		t.Errorf("bcrypt checks after 100 cached logins = %d, want %d (no new ones)", got, afterFirst)
	}
	for i := 0; i < 3; i++ {
		if _, f := a.Authenticate("svc", "wrong"); f != auth.FailureBadPassword {
			t.Fatalf("wrong password: %q, want bad_password", f)
		}
	}
	if got := a.BcryptChecks(); got != afterFirst+3 {
		t.Errorf("bcrypt checks = %d, want %d: wrong passwords must never be served from the cache", got, afterFirst+3)
	}
	// An unknown name costs a bcrypt check too (no timing difference).
	if _, f := a.Authenticate("nobody", "right"); f != auth.FailureUnknownUser {
		t.Fatalf("unknown user: %q", f)
	}
	if got := a.BcryptChecks(); got != afterFirst+4 {
		t.Errorf("bcrypt checks after an unknown user = %d, want %d", got, afterFirst+4)
	}
	// The cached entry still recognises the right one after the failures.
	if _, f := a.Authenticate("svc", "right"); f != auth.FailureNone {
		t.Errorf("right password after wrong ones: %s", f)
	}
}

func TestNewUser_badInput(t *testing.T) {
	for _, tc := range []struct {
		name, pw string
		role     auth.Role
		apps     []string
		want     string
	}{
		{"u", "{bcrypt}not-a-hash", auth.RoleRead, nil, "not a bcrypt hash"},
		{"u", "{bcrypt}$2a$10$short", auth.RoleRead, nil, "not a bcrypt hash"},
		{"u", "{sha256}abcd", auth.RoleRead, nil, "{sha256} is not supported"},
		{"u", "", auth.RoleRead, nil, "empty password"},
		{"", "pw", auth.RoleRead, nil, "user name"},
		{"a:b", "pw", auth.RoleRead, nil, "user name"},
		{"u", "pw", auth.RoleRead, []string{"ORDERS"}, "only limits a write user"},
		{"u", "pw", auth.RoleAdmin, []string{"ORDERS"}, "only limits a write user"},
	} {
		_, err := auth.NewUser(tc.name, tc.pw, tc.role, tc.apps)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewUser(%q, %q) = %v, want an error saying %q", tc.name, tc.pw, err, tc.want)
		}
		if err != nil && tc.pw != "" && strings.Contains(err.Error(), tc.pw) && !strings.HasPrefix(tc.pw, "{sha") {
			t.Errorf("error %q repeats the password", err)
		}
	}
	_, err := auth.NewUser("u", "{bcrypt}nope", auth.RoleRead, nil)
	if !errors.Is(err, auth.ErrBadPasswordEncoding) {
		t.Errorf("bad hash error %v does not wrap ErrBadPasswordEncoding", err)
	}
	if _, err := auth.NewAuthenticator(mustUser(t, "a", "x", auth.RoleRead), mustUser(t, "a", "y", auth.RoleRead)); err == nil {
		t.Error("duplicate user accepted")
	}
}

func TestUser_MayWrite(t *testing.T) {
	team := mustUser(t, "team", "pw", auth.RoleWrite, "orders", " Billing ")
	all := mustUser(t, "all", "pw", auth.RoleWrite)
	reader := mustUser(t, "reader", "pw", auth.RoleRead)
	admin := mustUser(t, "admin", "pw", auth.RoleAdmin)
	for _, tc := range []struct {
		u    *auth.User
		app  string
		want bool
	}{
		{team, "ORDERS", true}, {team, "orders", true}, {team, "BILLING", true}, {team, "PAYMENTS", false},
		{all, "PAYMENTS", true}, {reader, "ORDERS", false}, {admin, "ANY", true},
	} {
		if got := tc.u.MayWrite(tc.app); got != tc.want {
			t.Errorf("%s.MayWrite(%s) = %v, want %v", tc.u.Name, tc.app, got, tc.want)
		}
	}
	for _, s := range []string{"read", "WRITE", " admin "} {
		if _, err := auth.ParseRole(s); err != nil {
			t.Errorf("ParseRole(%q): %v", s, err)
		}
	}
	if _, err := auth.ParseRole("root"); err == nil {
		t.Error("ParseRole(root) accepted")
	}
}

func BenchmarkAuthenticator_bcryptCached(b *testing.B) {
	h, _ := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.DefaultCost)
	u, _ := auth.NewUser("svc", "{bcrypt}"+string(h), auth.RoleWrite, nil)
	a, _ := auth.NewAuthenticator(u)
	a.Authenticate("svc", "right")
	b.ReportAllocs()
	for b.Loop() {
		if _, f := a.Authenticate("svc", "right"); f != auth.FailureNone {
			b.Fatal(f)
		}
	}
}
