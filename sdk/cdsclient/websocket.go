package cdsclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/gorilla/websocket"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// QueueEvents subscribes to the V1 websocket /ws with the filter
// [{"type":"queue","hatchery_type":"vsphere"}] and sends the id of every
// job event whose status is Waiting (or absent) to jobIDs. It returns
// ctx.Err() when ctx ends, or the error that dropped the connection: the
// caller reconnects (and keeps polling meanwhile).
func (c *Client) QueueEvents(ctx context.Context, jobIDs chan<- int64) error {
	filters := []sdk.WebsocketFilter{{Type: sdk.WebsocketFilterTypeQueue, HatcheryType: c.cfg.ModelType}}
	err := c.websocket(ctx, v1, "/ws", filters, func(msg []byte) error {
		var ev sdk.WebsocketEvent
		if err := json.Unmarshal(msg, &ev); err != nil {
			c.log.Warn("cds websocket: undecodable message", "api", "v1", logkey.Err, err)
			return nil
		}
		if ev.Event.EventType != sdk.EventTypeRunWorkflowJob {
			return nil
		}
		var job sdk.EventRunWorkflowJob
		if err := json.Unmarshal(ev.Event.Payload, &job); err != nil || job.ID == 0 {
			c.log.Warn("cds websocket: job event without id", "api", "v1")
			return nil
		}
		st := ev.Event.Status
		if st == "" {
			st = job.Status
		}
		if st != "" && st != sdk.StatusWaiting {
			return nil
		}
		select {
		case jobIDs <- job.ID:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		return fmt.Errorf("queue events: %w", err)
	}
	return nil
}

// V2QueueEvents subscribes to the V2 websocket /v2/hatchery/ws and sends
// the run job id of every event ({"region","model_type","job_run_id"}) to
// jobRunIDs, until ctx ends (ctx.Err()) or the connection drops (its error).
func (c *Client) V2QueueEvents(ctx context.Context, jobRunIDs chan<- string) error {
	err := c.websocket(ctx, v2, "/v2/hatchery/ws", nil, func(msg []byte) error {
		var ev sdk.WebsocketJobQueueEvent
		if err := json.Unmarshal(msg, &ev); err != nil || ev.JobRunID == "" {
			c.log.Warn("cds websocket: message without job run id", "api", "v2")
			return nil
		}
		select {
		case jobRunIDs <- ev.JobRunID:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		return fmt.Errorf("v2 queue events: %w", err)
	}
	return nil
}

// websocket dials path with the session of v (signing in again once on a
// 401 handshake), sends hello when not nil, and calls handle for every
// message until ctx ends or the connection fails.
func (c *Client) websocket(ctx context.Context, v apiVersion, path string, hello any, handle func([]byte) error) error {
	conn, err := c.dialWS(ctx, v, path)
	if errors.Is(err, ErrNotAuthenticated) {
		if serr := c.signIn(ctx, v, c.session(v)); serr != nil {
			return errors.Join(err, serr)
		}
		conn, err = c.dialWS(ctx, v, path)
	}
	if err != nil {
		return err
	}
	// The watcher closes the connection when ctx ends, which unblocks the
	// read below; it is joined before returning.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-stop:
		}
		_ = conn.Close()
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	if hello != nil {
		if err := conn.WriteJSON(hello); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("websocket %s: subscribe: %w", path, err)
		}
	}
	Connected(ctx)
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("websocket %s: read: %w", path, err)
		}
		if err := handle(msg); err != nil {
			return err
		}
	}
}

func (c *Client) dialWS(ctx context.Context, v apiVersion, path string) (*websocket.Conn, error) {
	tok := c.session(v)
	if tok == "" {
		if (v == v1 && !c.HasV1()) || (v == v2 && !c.HasV2()) {
			return nil, fmt.Errorf("websocket %s: %w (%s)", path, ErrNoSession, v)
		}
		if err := c.signIn(ctx, v, ""); err != nil {
			return nil, err
		}
		tok = c.session(v)
	}
	u, err := c.reqURL(path, nil)
	if err != nil {
		return nil, fmt.Errorf("websocket %s: build url: %w", path, err)
	}
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: c.cfg.RequestTimeout,
	}
	if c.cfg.Insecure {
		d.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // api.http.insecure asks for it
	}
	if c.cfg.HTTPClient != nil {
		if tr, ok := c.cfg.HTTPClient.Transport.(*http.Transport); ok && tr.TLSClientConfig != nil {
			d.TLSClientConfig = tr.TLSClientConfig.Clone()
		}
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	conn, resp, err := d.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			body := make([]byte, 4096)
			n, _ := resp.Body.Read(body)
			return nil, fmt.Errorf("websocket %s: %w", path, newAPIError(http.MethodGet, path, resp.StatusCode, body[:n]))
		}
		return nil, fmt.Errorf("websocket %s: dial: %w", path, err)
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	return conn, nil
}

type connectedKey struct{}

// WithConnected returns a context carrying fn, which QueueEvents and
// V2QueueEvents call once their websocket is established (dialled and
// subscribed), before the first read: the moment from which no event is
// missed, when a caller polls what may have been queued while it was
// disconnected.
func WithConnected(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, connectedKey{}, fn)
}

// Connected calls the function WithConnected put in ctx, if any: what
// QueueEvents and V2QueueEvents do once their websocket is established,
// and what a fake of them in a test does to say the same.
func Connected(ctx context.Context) {
	if fn, ok := ctx.Value(connectedKey{}).(func()); ok && fn != nil {
		fn()
	}
}
