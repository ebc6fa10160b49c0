package auth

// Remembered is how many signatures the verifier holds.
func (v *PeerVerifier) Remembered() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}

// BcryptChecks is how many bcrypt comparisons have run.
func (a *Authenticator) BcryptChecks() int {
	a.bcryptMu.Lock()
	defer a.bcryptMu.Unlock()
	return a.bcryptChecks
}
