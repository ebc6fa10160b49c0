package healthcheck

import "github.com/muster-registry/muster/registry"

// Owner is the member that probes key among members (node names): the
// highest rendezvous score of member and key's app, so every node that
// knows the same members picks the same one without talking, and when a
// member goes only its own apps move (each to the member with the
// next-highest score). "" when members is empty.
//
// The unit is the app, not the instance: the guard (checker.go) must see
// every instance of an app fail or pass in the same round, which only the
// node that probes all of them can. The cost is spread over the members
// app by app; an app far larger than the others weighs on one node, within
// MaxConcurrent.
func Owner(members []string, key registry.InstanceKey) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		s := score(m, key.App)
		if best == "" || s > bestScore || s == bestScore && m < best {
			best, bestScore = m, s
		}
	}
	return best
}

func score(member, app string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, s := range [...]string{member, app} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		h = (h ^ 0xff) * prime
	}
	// fnv-1a's low bits mix poorly for short inputs: finish with a
	// 64-bit mixer (splitmix64's) so shares come out even.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
