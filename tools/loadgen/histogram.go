package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// Histogram records durations in log-linear buckets, as HdrHistogram does:
// exact below 128 ns, then 64 buckets per power of two, so any quantile it
// reports is within 1/64 (1.6 %) of the true value. Recording is O(1) and
// allocates nothing; one histogram per goroutine, merged at the end.
type Histogram struct {
	counts   []uint64
	n        uint64
	min, max int64 // ns
}

const (
	subBits    = 6
	subBuckets = 1 << subBits
	// A bucket index for every non-negative int64.
	numBuckets = (63-subBits)*subBuckets + 2*subBuckets
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, numBuckets), min: math.MaxInt64}
}

func bucketOf(v int64) int {
	if v < 2*subBuckets {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - 1 - subBits
	return shift*subBuckets + int(v>>uint(shift))
}

// bucketValue is the midpoint of bucket i.
func bucketValue(i int) int64 {
	if i < 2*subBuckets {
		return int64(i)
	}
	shift := i/subBuckets - 1
	m := int64(i - shift*subBuckets)
	lo := m << uint(shift)
	return lo + (int64(1)<<uint(shift))/2
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	h.n++
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// Merge adds every value of o.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest recorded value, exactly.
func (h *Histogram) Max() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.max)
}

// Min is the smallest recorded value, exactly.
func (h *Histogram) Min() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.min)
}

// Quantile returns the value below or at which a share q (0..1) of the
// recorded values lie, within the bucket precision; 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	if rank >= h.n {
		return time.Duration(h.max)
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := bucketValue(i)
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}
