package dns

import (
	"net/netip"
	"testing"
	"time"
)

func TestLimiterPerSource(t *testing.T) {
	now := time.Unix(0, 0)
	l := newLimiter(10, 3, func() time.Time { return now })
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	for i := range 3 {
		if !l.allow(a) {
			t.Fatalf("burst %d refused", i)
		}
	}
	if l.allow(a) {
		t.Fatal("over burst allowed")
	}
	if !l.allow(b) {
		t.Fatal("another source limited by the first")
	}
	now = now.Add(100 * time.Millisecond) // one token at 10/s
	if !l.allow(a) || l.allow(a) {
		t.Fatal("refill is not one token per 1/rate")
	}
	v6a, v6b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	for range 3 {
		l.allow(v6a)
	}
	if l.allow(v6b) {
		t.Fatal("IPv6 sources of one /64 do not share a bucket")
	}
	now = now.Add(time.Hour)
	l.allow(a)
	if len(l.buckets) != 1 {
		t.Fatalf("idle buckets not forgotten: %d", len(l.buckets))
	}
}
