package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// joinWarnEvery is how often a join failure that repeats the previous one
// word for word is logged at Warn; the repeats in between go to Debug.
const joinWarnEvery = time.Minute

// joinLoop calls memberlist's Join with the seeds until one answers or ctx
// ends, waiting joinBackoff between attempts. It is Start's goroutine.
func (c *Cluster) joinLoop(ctx context.Context, ml *memberlist.Memberlist) {
	defer c.wg.Done()
	seeds := c.cfg.Join
	lim := warnLimiter{every: joinWarnEvery}
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return
		}
		n, err := ml.Join(seeds)
		if err == nil {
			c.joined.Store(true)
			c.log.Info().Strs(keySeeds, seeds).Int(keyNodesContacted, n).Int(keyAttempt, attempt).
				Msg("joined cluster")
			c.rejoinLoop(ctx, ml)
			return
		}
		jerr := &joinError{seeds: seeds, err: err}
		wait := joinBackoff(c.cfg.JoinRetryInterval, c.cfg.JoinRetryMaxInterval, attempt)
		warn, suppressed := lim.allow(jerr.Error(), time.Now())
		ev := c.log.Debug()
		if warn {
			ev = c.log.Warn()
		}
		ev = ev.Strs(keySeeds, seeds).Err(jerr).Int(keyAttempt, attempt).Stringer(keyRetryIn, wait)
		if suppressed > 0 {
			ev = ev.Int(keySuppressed, suppressed) // identical failures logged at Debug since the last Warn
		}
		ev.Msg("join failed; retrying")

		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// rejoinLoop keeps the node joined after a partition or after peers
// restarted elsewhere: every RejoinInterval, when fewer peers are alive than
// there are seeds, or some member is dead, it joins the seeds and the dead
// members' addresses again.
func (c *Cluster) rejoinLoop(ctx context.Context, ml *memberlist.Memberlist) {
	t := time.NewTicker(c.cfg.RejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		alive, dead := c.peerCounts()
		if alive >= len(c.cfg.Join) && len(dead) == 0 {
			continue
		}
		targets := append(slices.Clone(c.cfg.Join), dead...)
		n, err := ml.Join(targets)
		after, _ := c.peerCounts()
		switch {
		case err == nil && after > alive:
			c.log.Info().Strs(keySeeds, targets).Int(keyNodesContacted, n).Int(keyAlivePeers, after).Msg("rejoined peers")
		case err != nil:
			c.log.Debug().Err(&joinError{seeds: targets, err: err}).Msg("rejoin failed; will retry")
		}
	}
}

// peerCounts returns how many peers are alive or suspect, and the
// addresses of those listed dead (left members went away on purpose).
func (c *Cluster) peerCounts() (alive int, dead []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.members {
		switch {
		case e.Self:
		case e.State == StateAlive || e.State == StateSuspect:
			alive++
		case e.State == StateDead:
			dead = append(dead, hostPort(e.Member))
		}
	}
	return alive, dead
}

// joinBackoff is the wait after the failures-th consecutive failed join:
// base × 2^(failures−1), capped at max.
func joinBackoff(base, max time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < max; i++ {
		if d > max/2 {
			return max // doubling would pass max (or overflow)
		}
		d *= 2
	}
	return min(d, max)
}

// joinError is a failed join attempt. Error flattens memberlist's
// multi-line error list onto one line and adds the secret-key hint when the
// failure looks like a key mismatch.
type joinError struct {
	seeds []string
	err   error
}

func (e *joinError) Error() string {
	msg := fmt.Sprintf("cluster: join %s: %s", strings.Join(e.seeds, ","), flattenErr(e.err))
	if looksLikeKeyMismatch(msg) {
		msg += " (" + secretKeyHint + ")"
	}
	return msg
}

func (e *joinError) Unwrap() error { return e.err }

// flattenErr turns go-multierror's "2 errors occurred:\n\t* a\n\t* b\n\n"
// into "a; b".
func flattenErr(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	var parts []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasSuffix(l, "occurred:") {
			continue
		}
		l = strings.TrimPrefix(l, "* ")
		if l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// warnLimiter decides which repeated failures deserve a Warn: the first,
// any whose text differs from the last warned one, and one per period
// otherwise. It is not safe for concurrent use; the join loop owns it.
type warnLimiter struct {
	every      time.Duration
	last       string
	at         time.Time
	suppressed int
}

// allow reports whether msg at now should be logged at Warn and, if so,
// how many messages were held back since the previous Warn.
func (w *warnLimiter) allow(msg string, now time.Time) (bool, int) {
	if !w.at.IsZero() && msg == w.last && now.Sub(w.at) < w.every {
		w.suppressed++
		return false, 0
	}
	n := w.suppressed
	w.last, w.at, w.suppressed = msg, now, 0
	return true, n
}
