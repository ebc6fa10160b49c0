package dns

import (
	"net/netip"
	"sync"
	"time"
)

// limiter is a token bucket per source (IPv4 /32, IPv6 /64): rate
// responses a second, bursts up to burst. Buckets idle long enough to be
// full again are forgotten, so a spoofed flood from many sources costs
// memory only while it lasts (and at most maxSources buckets).
type limiter struct {
	rate, burst float64
	now         func() time.Time
	// mu guards buckets and lastSweep.
	mu        sync.Mutex
	buckets   map[netip.Prefix]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

const maxSources = 100_000

func newLimiter(rate, burst int, now func() time.Time) *limiter {
	return &limiter{rate: float64(rate), burst: float64(burst), now: now, buckets: map[netip.Prefix]*bucket{}}
}

func (l *limiter) allow(a netip.Addr) bool {
	if l.rate <= 0 {
		return true
	}
	bits := 32
	if a.Is6() {
		bits = 64
	}
	key, _ := a.Prefix(bits)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > time.Minute || len(l.buckets) >= maxSources {
		full := time.Duration(l.burst / l.rate * float64(time.Second))
		for k, b := range l.buckets {
			if now.Sub(b.at) >= full {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
		if len(l.buckets) >= maxSources {
			return false
		}
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
