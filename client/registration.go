package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// ErrNotRegistered means the server does not hold the instance, or holds
// older data of it than the caller (a heartbeat answered 404): the caller
// should register it again. Registration does so by itself.
var ErrNotRegistered = errors.New("client: instance not registered with the server")

// Registration is a registered instance that the client keeps alive: it
// sends a heartbeat every RenewalInterval and registers again when a
// server answers one with 404 (the server lost the instance, for example
// after a restart or an eviction). Close cancels it.
type Registration struct {
	c *Client
	// interval is the heartbeat period, fixed at Register.
	interval time.Duration

	// mu guards inst and lastDirty.
	mu        sync.Mutex
	inst      Instance
	lastDirty int64 // ms since epoch, Eureka wire; raised on every change

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Register registers in and keeps it registered until the Registration or
// the Client is closed. App, HostName and IPAddr are required; see
// Instance for the defaults of the rest. Register returns once a server
// accepted the registration, retrying with backoff (RetryBackoff up to
// MaxRetryBackoff) while none does, so a service can start before its
// registry; ctx bounds only that wait. A server that refuses the instance
// itself (400) ends it at once with a *StatusError.
func (c *Client) Register(ctx context.Context, in Instance) (*Registration, error) {
	if in.App == "" || in.HostName == "" || in.IPAddr == "" {
		return nil, errors.New("client: Register needs App, HostName and IPAddr")
	}
	if in.Status != "" && !in.Status.valid() {
		return nil, fmt.Errorf("client: invalid status %q", in.Status)
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	in = in.withDefaults()
	r := &Registration{c: c, interval: in.RenewalInterval, inst: in, lastDirty: c.clock.Now().UnixMilli(), done: make(chan struct{})}
	for failures := 1; ; failures++ {
		err := r.register(ctx)
		if err == nil {
			break
		}
		var se *StatusError
		if ctx.Err() != nil || errors.As(err, &se) && se.Code >= 400 && se.Code < 500 {
			return nil, fmt.Errorf("client: register %s/%s: %w", in.App, in.ID, err)
		}
		c.log.Debug().Err(err).Str("app", in.App).Str("instance_id", in.ID).Msg("registration failed, retrying")
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("client: register %s/%s: %w (last: %w)", in.App, in.ID, ctx.Err(), err)
		case <-c.clock.After(backoff(c.cfg.RetryBackoff, c.cfg.MaxRetryBackoff, failures)):
		}
	}
	c.regMu.Lock()
	if c.closed {
		c.regMu.Unlock()
		_ = c.Cancel(context.Background(), in.App, in.ID)
		return nil, ErrClosed
	}
	c.regs[r] = struct{}{}
	c.regMu.Unlock()
	loopCtx, stop := context.WithCancel(context.Background())
	r.stop = stop
	go r.run(loopCtx)
	return r, nil
}

// Instance returns the instance as registered (defaults filled in).
func (r *Registration) Instance() Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.inst
	in.Metadata = maps.Clone(in.Metadata)
	return in
}

// SetStatus changes the instance's own status (say DOWN while it drains,
// UP when it is ready) and registers it again with a newer
// lastDirtyTimestamp, as the Java client does. If no server takes the new
// registration now, the next heartbeat carries the newer timestamp, the
// server answers 404, and the registration is sent again then.
//
// The server applies Eureka's status rules (EUREKA.md §5.2): DOWN,
// STARTING and UNKNOWN are taken as sent, but a registration cannot turn
// an UP instance OUT_OF_SERVICE or the reverse (the server keeps the
// status it holds), and an override set with SetStatusOverride wins over
// any status the instance registers. Take an instance out of service with
// SetStatusOverride.
func (r *Registration) SetStatus(ctx context.Context, st Status) error {
	if !st.valid() {
		return fmt.Errorf("client: invalid status %q", st)
	}
	r.mu.Lock()
	r.inst.Status = st
	r.touchLocked()
	r.mu.Unlock()
	return r.register(ctx)
}

// touchLocked raises lastDirty past its current value, as Java's
// InstanceInfo#setIsDirtyWithTime does, so the server takes the new data
// over any copy it holds.
func (r *Registration) touchLocked() {
	r.lastDirty = max(r.c.clock.Now().UnixMilli(), r.lastDirty+1)
}

func (r *Registration) register(ctx context.Context) error {
	r.mu.Lock()
	wi, app := r.inst.wireInstance(r.lastDirty), r.inst.App
	r.mu.Unlock()
	return r.c.sendRegister(ctx, app, wi)
}

// run sends heartbeats until ctx ends. After a failed one it retries
// sooner, with backoff, but never later than the interval.
func (r *Registration) run(ctx context.Context) {
	defer close(r.done)
	failures := 0
	for {
		wait := r.interval
		if failures > 0 {
			wait = min(wait, backoff(r.c.cfg.RetryBackoff, r.c.cfg.MaxRetryBackoff, failures))
		}
		select {
		case <-ctx.Done():
			return
		case <-r.c.clock.After(wait):
		}
		if r.heartbeat(ctx) {
			failures = 0
		} else if ctx.Err() == nil {
			failures++
		}
	}
}

// heartbeat sends one heartbeat and registers again after a 404. It
// reports whether the instance is registered afterwards.
func (r *Registration) heartbeat(ctx context.Context) bool {
	r.mu.Lock()
	app, id, status, lastDirty := r.inst.App, r.inst.ID, r.inst.Status, r.lastDirty
	r.mu.Unlock()
	err := r.c.Heartbeat(ctx, app, id, status, time.UnixMilli(lastDirty))
	switch {
	case err == nil:
		return true
	case ctx.Err() != nil:
		return false
	case errors.Is(err, ErrNotRegistered):
		r.c.stats.reRegistrations.Add(1)
		r.mu.Lock()
		r.touchLocked()
		r.mu.Unlock()
		if err := r.register(ctx); err != nil {
			r.c.log.Warn().Err(err).Str("app", app).Str("instance_id", id).Msg("registering again after a 404 failed")
			return false
		}
		r.c.log.Info().Str("app", app).Str("instance_id", id).Msg("registered again: the server did not know the instance")
		return true
	default:
		r.c.log.Warn().Err(err).Str("app", app).Str("instance_id", id).Msg("heartbeat failed")
		return false
	}
}

// Close stops the heartbeats and cancels the instance at the server
// (DELETE), within RequestTimeout per server tried. It returns the
// cancel's error; a server that no longer knows the instance counts as
// cancelled. Close may be called more than once; later calls return the
// first result.
func (r *Registration) Close() error {
	r.closeOnce.Do(func() {
		r.stop()
		<-r.done
		r.c.regMu.Lock()
		delete(r.c.regs, r)
		r.c.regMu.Unlock()
		r.mu.Lock()
		app, id := r.inst.App, r.inst.ID
		r.mu.Unlock()
		if err := r.c.Cancel(context.Background(), app, id); err != nil && !errors.Is(err, ErrNotRegistered) {
			r.closeErr = err
		}
	})
	return r.closeErr
}

// RegisterOnce sends one registration of in (POST apps/{APP}), with
// lastDirty as its lastDirtyTimestamp, and nothing else: no heartbeats
// follow (see Heartbeat). It is for callers that schedule heartbeats
// themselves, such as a simulator of many instances; a service uses
// Register. in gets the defaults Register gives it; App, HostName and
// IPAddr are required.
func (c *Client) RegisterOnce(ctx context.Context, in Instance, lastDirty time.Time) error {
	if in.App == "" || in.HostName == "" || in.IPAddr == "" {
		return errors.New("client: RegisterOnce needs App, HostName and IPAddr")
	}
	if in.Status != "" && !in.Status.valid() {
		return fmt.Errorf("client: invalid status %q", in.Status)
	}
	in = in.withDefaults()
	return c.sendRegister(ctx, in.App, in.wireInstance(lastDirty.UnixMilli()))
}

func (c *Client) sendRegister(ctx context.Context, app string, wi *registry.Instance) error {
	body := wire.AppendInstanceJSON(make([]byte, 0, 1024), registry.InstanceView{Instance: wi})
	rep, err := c.call(ctx, request{op: opRegister, method: http.MethodPost, path: "apps/" + url.PathEscape(app), body: body})
	if err != nil {
		return err
	}
	if rep.code/100 != 2 {
		return &StatusError{Op: opRegister.String(), Server: c.servers.list[rep.server].base, Code: rep.code}
	}
	c.stats.registrations.Add(1)
	return nil
}

func instancePath(app, id string) string {
	return "apps/" + url.PathEscape(app) + "/" + url.PathEscape(id)
}

// Heartbeat sends one heartbeat for an instance registered by other
// means (a Registration sends its own), as the Java client shapes it: PUT
// apps/{app}/{id}?status={status}&lastDirtyTimestamp={ms}. status is the
// instance's own status (servers ignore it; empty leaves it out);
// lastDirty is its lastDirtyTimestamp as last registered (zero leaves it
// out), and a server that holds older data answers 404. It returns
// ErrNotRegistered when the server answers 404: register the instance
// again.
func (c *Client) Heartbeat(ctx context.Context, app, id string, status Status, lastDirty time.Time) error {
	var query []string // in the Java client's order
	if status != "" {
		query = append(query, "status="+url.QueryEscape(string(status)))
	}
	if !lastDirty.IsZero() {
		query = append(query, "lastDirtyTimestamp="+strconv.FormatInt(lastDirty.UnixMilli(), 10))
	}
	path := instancePath(app, id)
	if len(query) > 0 {
		path += "?" + strings.Join(query, "&")
	}
	rep, err := c.call(ctx, request{op: opRenew, method: http.MethodPut, path: path})
	if err == nil && rep.code == http.StatusNotFound {
		err = fmt.Errorf("%w: %s/%s at %s", ErrNotRegistered, app, id, c.servers.list[rep.server].base)
	} else if err == nil && rep.code/100 != 2 {
		err = &StatusError{Op: opRenew.String(), Server: c.servers.list[rep.server].base, Code: rep.code}
	}
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, ErrNotRegistered) {
			c.stats.heartbeatFailures.Add(1)
		}
		return err
	}
	c.stats.heartbeats.Add(1)
	return nil
}

// Cancel cancels an instance registered by other means (DELETE
// apps/{app}/{id}); a Registration cancels itself on Close. It returns
// ErrNotRegistered when the server does not know the instance (already
// cancelled, or evicted).
func (c *Client) Cancel(ctx context.Context, app, id string) error {
	rep, err := c.call(ctx, request{op: opCancel, method: http.MethodDelete, path: instancePath(app, id)})
	switch {
	case err != nil:
		return fmt.Errorf("client: cancel %s/%s: %w", app, id, err)
	case rep.code == http.StatusNotFound:
		return fmt.Errorf("%w: %s/%s at %s", ErrNotRegistered, app, id, c.servers.list[rep.server].base)
	case rep.code/100 != 2:
		return &StatusError{Op: opCancel.String(), Server: c.servers.list[rep.server].base, Code: rep.code}
	}
	c.stats.cancels.Add(1)
	return nil
}

// SetStatusOverride sets a status override on any registered instance
// (PUT apps/{app}/{id}/status?value=…), as operators do to take an
// instance out of service: the server then reports st whatever the
// instance itself registers, until the override is deleted. It returns
// ErrNotRegistered when the server does not know the instance.
func (c *Client) SetStatusOverride(ctx context.Context, app, id string, st Status) error {
	if !st.valid() {
		return fmt.Errorf("client: invalid status %q", st)
	}
	return c.statusRequest(ctx, http.MethodPut, app, id, st)
}

// DeleteStatusOverride removes an instance's status override (DELETE
// apps/{app}/{id}/status). With st set, the instance's status becomes st
// at once; with st empty, the server sets UNKNOWN, which makes the
// instance's next heartbeat answer 404, so that the instance registers
// again with its own status (a Registration does that by itself). It
// returns ErrNotRegistered when the server does not know the instance.
func (c *Client) DeleteStatusOverride(ctx context.Context, app, id string, st Status) error {
	if st != "" && !st.valid() {
		return fmt.Errorf("client: invalid status %q", st)
	}
	return c.statusRequest(ctx, http.MethodDelete, app, id, st)
}

func (c *Client) statusRequest(ctx context.Context, method, app, id string, st Status) error {
	path := instancePath(app, id) + "/status"
	if st != "" {
		path += "?value=" + url.QueryEscape(string(st))
	}
	rep, err := c.call(ctx, request{op: opStatus, method: method, path: path})
	switch {
	case err != nil:
		return err
	case rep.code == http.StatusNotFound:
		return fmt.Errorf("%w: %s/%s at %s", ErrNotRegistered, app, id, c.servers.list[rep.server].base)
	case rep.code/100 != 2:
		return &StatusError{Op: opStatus.String(), Server: c.servers.list[rep.server].base, Code: rep.code}
	}
	return nil
}
