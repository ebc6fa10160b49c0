package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Role is what a user may do.
type Role int

const (
	// RoleRead may GET the Eureka API, the dashboard and /metrics.
	RoleRead Role = iota + 1
	// RoleWrite may also register, renew, cancel and change status and
	// metadata, of every app or of the apps listed for the user.
	RoleWrite
	// RoleAdmin may do everything, /admin/* included.
	RoleAdmin
)

func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole reads read, write or admin.
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "read":
		return RoleRead, nil
	case "write":
		return RoleWrite, nil
	case "admin":
		return RoleAdmin, nil
	}
	return 0, fmt.Errorf("auth: role %q: want read, write or admin", s)
}

// ErrBadPasswordEncoding is a configured password that cannot be used: an
// unknown {encoder} prefix or a malformed bcrypt hash.
var ErrBadPasswordEncoding = errors.New("auth: unusable password encoding")

// User is one configured user. Build it with NewUser.
type User struct {
	Name string
	Role Role
	// apps, upper-cased, are the only apps a write user may change; empty
	// means every app.
	apps []string

	plainDigest [sha256.Size]byte // for plain and {noop} passwords
	bcryptHash  []byte            // for {bcrypt} passwords; nil otherwise
}

// NewUser checks and stores a user. password is as Spring takes it: plain,
// "{noop}…" or "{bcrypt}$2a$…"; other encoders ({pbkdf2}, {scrypt}, …)
// are not supported and, like a malformed hash, return an error wrapping
// ErrBadPasswordEncoding that never repeats the password. apps may only be
// given for a write user.
func NewUser(name, password string, role Role, apps []string) (*User, error) {
	if name == "" || strings.ContainsAny(name, ":") {
		return nil, fmt.Errorf("auth: user name %q: must be non-empty and hold no ':'", name)
	}
	if password == "" {
		return nil, fmt.Errorf("auth: user %s has an empty password", name)
	}
	if role < RoleRead || role > RoleAdmin {
		return nil, fmt.Errorf("auth: user %s: bad role %v", name, role)
	}
	if len(apps) > 0 && role != RoleWrite {
		return nil, fmt.Errorf("auth: user %s: an apps list only limits a write user, not %s", name, role)
	}
	u := &User{Name: name, Role: role}
	for _, a := range apps {
		if a = strings.TrimSpace(a); a != "" {
			u.apps = append(u.apps, strings.ToUpper(a))
		}
	}
	switch {
	case strings.HasPrefix(password, "{bcrypt}"):
		h := []byte(strings.TrimPrefix(password, "{bcrypt}"))
		if _, err := bcrypt.Cost(h); err != nil {
			return nil, fmt.Errorf("%w: user %s: {bcrypt} value is not a bcrypt hash ($2a$/$2b$/$2y$, 60 characters)", ErrBadPasswordEncoding, name)
		}
		u.bcryptHash = h
	case strings.HasPrefix(password, "{noop}"):
		u.plainDigest = sha256.Sum256([]byte(strings.TrimPrefix(password, "{noop}")))
	case strings.HasPrefix(password, "{") && strings.Contains(password, "}"):
		id := password[1:strings.IndexByte(password, '}')]
		return nil, fmt.Errorf("%w: user %s: password encoder {%s} is not supported (use {noop} or {bcrypt})", ErrBadPasswordEncoding, name, id)
	default:
		// Spring Boot prefixes a bare spring.security.user.password with
		// {noop} (UserDetailsServiceAutoConfiguration); so does Muster.
		u.plainDigest = sha256.Sum256([]byte(password))
	}
	return u, nil
}

// Apps lists the apps a write user is limited to (upper case); nil means
// every app.
func (u *User) Apps() []string { return u.apps }

// MayRead tells whether the user may read the registry.
func (u *User) MayRead() bool { return u.Role >= RoleRead }

// MayWrite tells whether the user may change instances of app.
func (u *User) MayWrite(app string) bool {
	switch {
	case u.Role == RoleAdmin:
		return true
	case u.Role != RoleWrite:
		return false
	case len(u.apps) == 0:
		return true
	}
	for _, a := range u.apps {
		if strings.EqualFold(a, app) {
			return true
		}
	}
	return false
}

// IsAdmin tells whether the user has the admin role.
func (u *User) IsAdmin() bool { return u.Role == RoleAdmin }

// Failure names why a request was refused; it is the reason label of
// muster_auth_failures_total and never carries a credential.
type Failure string

// Reasons for refusing a request.
const (
	FailureNone          Failure = ""
	FailureMissing       Failure = "missing_credentials" // no Authorization header
	FailureMalformed     Failure = "malformed_header"    // an Authorization header that is not Basic base64(user:pass)
	FailureUnknownUser   Failure = "unknown_user"        // no such user
	FailureBadPassword   Failure = "bad_password"        // the user exists, the password is wrong
	FailureForbidden     Failure = "forbidden"           // authenticated, but the role does not allow it
	FailurePeerRequired  Failure = "peer_signature_required"
	FailurePeerMalformed Failure = "peer_malformed" // signature headers missing or unreadable
	FailurePeerBad       Failure = "peer_bad_signature"
	FailurePeerStale     Failure = "peer_stale" // timestamp outside the skew window
	FailurePeerReplayed  Failure = "peer_replayed"
)

// Authenticator checks user names and passwords. It is safe for
// concurrent use.
type Authenticator struct {
	users map[string]*User

	// cacheKey keys the HMACs of verified bcrypt passwords. It is random per
	// process, so the cache is worthless outside it.
	cacheKey []byte
	macs     sync.Pool // of hash.Hash (HMAC-SHA256 under cacheKey)

	// mu guards verified: per bcrypt user, the HMAC of the last password
	// that passed bcrypt.
	mu       sync.RWMutex
	verified map[string][sha256.Size]byte

	// decoyHash is compared against for unknown user names when some user
	// has a bcrypt password; nil otherwise.
	decoyHash []byte
	// bcryptSlots bounds concurrent bcrypt checks.
	bcryptSlots chan struct{}
	// bcryptMu guards bcryptChecks, which counts real bcrypt comparisons
	// (tests check the cache).
	bcryptMu     sync.Mutex
	bcryptChecks int
}

// NewAuthenticator returns an authenticator over users; names must be
// unique.
func NewAuthenticator(users ...*User) (*Authenticator, error) {
	a := &Authenticator{
		users:       make(map[string]*User, len(users)),
		cacheKey:    make([]byte, 32),
		verified:    map[string][sha256.Size]byte{},
		bcryptSlots: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
	}
	if _, err := rand.Read(a.cacheKey); err != nil {
		return nil, fmt.Errorf("auth: cache key: %w", err)
	}
	a.macs.New = func() any { return hmac.New(sha256.New, a.cacheKey) }
	for _, u := range users {
		if _, dup := a.users[u.Name]; dup {
			return nil, fmt.Errorf("auth: user %s is defined twice", u.Name)
		}
		a.users[u.Name] = u
		if a.decoyHash == nil && u.bcryptHash != nil {
			a.decoyHash = u.bcryptHash
		}
	}
	if len(a.users) == 0 {
		return nil, errors.New("auth: no users")
	}
	return a, nil
}

// Authenticate checks a user name and password. It returns the user, or a
// failure (FailureUnknownUser or FailureBadPassword).
func (a *Authenticator) Authenticate(name, password string) (*User, Failure) {
	u, ok := a.users[name]
	if !ok {
		if a.decoyHash != nil {
			// An unknown name costs what a wrong password costs, so timing
			// does not tell which user names exist.
			a.bcryptCompare(a.decoyHash, password)
		}
		return nil, FailureUnknownUser
	}
	if u.bcryptHash == nil {
		d := sha256.Sum256([]byte(password))
		if subtle.ConstantTimeCompare(d[:], u.plainDigest[:]) != 1 {
			return nil, FailureBadPassword
		}
		return u, FailureNone
	}
	mac := a.mac(password)
	a.mu.RLock()
	cached, ok := a.verified[name]
	a.mu.RUnlock()
	if ok && subtle.ConstantTimeCompare(mac[:], cached[:]) == 1 {
		return u, FailureNone
	}
	if a.bcryptCompare(u.bcryptHash, password) != nil {
		return nil, FailureBadPassword
	}
	a.mu.Lock()
	a.verified[name] = mac
	a.mu.Unlock()
	return u, FailureNone
}

func (a *Authenticator) bcryptCompare(hash []byte, password string) error {
	a.bcryptSlots <- struct{}{}
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	<-a.bcryptSlots
	a.bcryptMu.Lock()
	a.bcryptChecks++
	a.bcryptMu.Unlock()
	return err
}

func (a *Authenticator) mac(password string) [sha256.Size]byte {
	h := a.macs.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(password))
	var out [sha256.Size]byte
	h.Sum(out[:0])
	a.macs.Put(h)
	return out
}
