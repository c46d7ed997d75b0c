package cdsclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// ErrNoSession is returned by a call whose API version (V1 or V2) has no
// session: the matching token is not configured.
var ErrNoSession = errors.New("no session for this api version")

// apiVersion tells which session a route uses: V1 routes take the V1
// session, /v2 routes the V2 session (a V1 session on a V2 route answers 403).
type apiVersion int

const (
	v1 apiVersion = iota
	v2
)

func (v apiVersion) String() string {
	if v == v2 {
		return "v2"
	}
	return "v1"
}

// Config is what the client needs to reach and sign in to the CDS API.
type Config struct {
	// APIURL is the base URL of the CDS API (api.http.url).
	APIURL string
	// Insecure turns TLS verification off (api.http.insecure).
	Insecure bool
	// Token is the V1 builtin consumer sign-in token; empty skips V1.
	Token string
	// TokenV2 is the V2 hatchery consumer sign-in token; empty skips V2.
	TokenV2 string
	// RequestTimeout bounds every request (0: no bound beyond ctx).
	RequestTimeout time.Duration
	// ServiceName is the hatchery's name (commonConfiguration.name).
	ServiceName string
	// HTTPURL is the hatchery's URL sent at sign-in (V1 service.http_url,
	// V2 http_url), which the API shows in its service list; SetHTTPURL
	// replaces it.
	HTTPURL string
	// ServiceConfig is sent as "config" at sign-in ({} when nil).
	ServiceConfig any
	// PublicKey is the PEM of the hatchery's RSA public key; it is sent as
	// a []byte, that is base64 of the PEM bytes.
	PublicKey []byte
	// Region is the hatchery's region (provision.region), sent at V1 sign-in.
	Region string
	// IgnoreJobWithNoRegion is sent at V1 sign-in.
	IgnoreJobWithNoRegion bool
	// Version is the hatchery's version, sent at V2 sign-in.
	Version string
	// ModelType is the V2 hatchery type ("vsphere" when empty).
	ModelType string
	// OSArch are the os/arch ("linux/amd64") of the V2 jobs the queue
	// listing asks for (one osarch parameter each, as upstream's
	// commonConfiguration.osArch); empty sends none and the API lists its
	// default, linux/amd64.
	OSArch []string
	// Logger receives debug and warning lines; slog.Default when nil.
	Logger *slog.Logger
	// HTTPClient replaces the HTTP client (tests); its Timeout is left alone.
	HTTPClient *http.Client
}

// Client is the CDS API client of a hatchery. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base *url.URL
	hc   *http.Client
	log  *slog.Logger

	mu       sync.Mutex
	sessions [2]string // session JWT per apiVersion
	apiURL   string
	service  *sdk.Service
	hatchery *sdk.V2Hatchery
	region   string
	httpURL  string // sent at sign-in: Config.HTTPURL or SetHTTPURL's

	signMu sync.Mutex // serialises sign-ins
}

var _ Interface = (*Client)(nil)

// New checks cfg and returns a client; it does not sign in (see SignIn).
func New(cfg Config) (*Client, error) {
	if cfg.APIURL == "" {
		return nil, errors.New("cdsclient: api url is empty")
	}
	u, err := url.Parse(strings.TrimRight(cfg.APIURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("cdsclient: parse api url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("cdsclient: api url scheme %q is not http or https", u.Scheme)
	}
	if cfg.Token == "" && cfg.TokenV2 == "" {
		return nil, errors.New("cdsclient: neither api token nor api tokenV2 is set")
	}
	if cfg.ModelType == "" {
		cfg.ModelType = sdk.VSphere
	}
	c := &Client{cfg: cfg, base: u, log: cfg.Logger, hc: cfg.HTTPClient, httpURL: cfg.HTTPURL}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.Insecure {
			tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // api.http.insecure asks for it
		}
		c.hc = &http.Client{Transport: tr}
	}
	return c, nil
}

// APIURL is the public API URL the API announced at sign-in ("" before).
func (c *Client) APIURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apiURL
}

// Service is the V1 service as the API answered at the last V1 sign-in (nil before).
func (c *Client) Service() *sdk.Service {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.service
}

// V2Hatchery is the V2 hatchery as the API answered at the last V2 sign-in
// (nil before), and the region the API gave it.
func (c *Client) V2Hatchery() (*sdk.V2Hatchery, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hatchery, c.region
}

// V2Region is the region the last V2 sign-in answered ("" before).
func (c *Client) V2Region() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.region
}

// HasV1 tells whether the client is configured for V1 (a V1 token is set).
func (c *Client) HasV1() bool { return c.cfg.Token != "" }

// HasV2 tells whether the client is configured for V2 (a V2 token is set).
func (c *Client) HasV2() bool { return c.cfg.TokenV2 != "" }

func (c *Client) session(v apiVersion) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[v]
}

// SignIn signs in with each configured token (V1 then V2) and keeps the
// session JWTs.
func (c *Client) SignIn(ctx context.Context) error {
	var errs []error
	if c.cfg.Token != "" {
		if err := c.signIn(ctx, v1, ""); err != nil {
			errs = append(errs, err)
		}
	}
	if c.cfg.TokenV2 != "" {
		if err := c.signIn(ctx, v2, ""); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetHTTPURL sets the hatchery's URL sent at the next sign-ins (V1
// service.http_url, V2 http_url): the framework sets it once its /mon
// server listens (hatchery.ServiceURL).
func (c *Client) SetHTTPURL(u string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.httpURL = u
}

// signIn signs in for version v unless the session already differs from
// stale (another goroutine signed in meanwhile).
func (c *Client) signIn(ctx context.Context, v apiVersion, stale string) error {
	c.signMu.Lock()
	defer c.signMu.Unlock()
	if stale != "" && c.session(v) != stale {
		return nil
	}
	cfgJSON := c.cfg.ServiceConfig
	if cfgJSON == nil {
		cfgJSON = map[string]any{}
	}
	c.mu.Lock()
	httpURL := c.httpURL
	c.mu.Unlock()
	switch v {
	case v1:
		req := sdk.AuthConsumerSigninRequest{
			Token: c.cfg.Token,
			Service: sdk.Service{
				Name:                  c.cfg.ServiceName,
				Type:                  sdk.TypeHatchery,
				HTTPURL:               httpURL,
				Config:                cfgJSON,
				PublicKey:             c.cfg.PublicKey,
				Region:                c.cfg.Region,
				IgnoreJobWithNoRegion: c.cfg.IgnoreJobWithNoRegion,
				Version:               c.cfg.Version,
			},
		}
		var resp sdk.AuthConsumerSigninResponse
		if err := c.send(ctx, v, http.MethodPost, "/auth/consumer/builtin/signin", nil, req, &resp, false); err != nil {
			return fmt.Errorf("sign in v1: %w", err)
		}
		if resp.Token == "" {
			return errors.New("sign in v1: the api answered no session token")
		}
		c.mu.Lock()
		c.sessions[v1] = resp.Token
		if resp.APIURL != "" {
			c.apiURL = resp.APIURL
		}
		c.service = resp.Service
		c.mu.Unlock()
	case v2:
		req := sdk.V2HatcherySigninRequest{
			Token:     c.cfg.TokenV2,
			Name:      c.cfg.ServiceName,
			Type:      c.cfg.ModelType,
			HTTPURL:   httpURL,
			Config:    cfgJSON,
			PublicKey: c.cfg.PublicKey,
			Version:   c.cfg.Version,
		}
		var resp sdk.V2HatcherySigninResponse
		if err := c.send(ctx, v, http.MethodPost, "/v2/auth/consumer/hatchery/signin", nil, req, &resp, false); err != nil {
			return fmt.Errorf("sign in v2: %w", err)
		}
		if resp.Token == "" {
			return errors.New("sign in v2: the api answered no session token")
		}
		c.mu.Lock()
		c.sessions[v2] = resp.Token
		if resp.APIURL != "" {
			c.apiURL = resp.APIURL
		}
		h := resp.Hatchery
		c.hatchery = &h
		c.region = resp.Region
		c.mu.Unlock()
		if !resp.UpToDate {
			// The API compares the version sent with its own: a hatchery
			// released on its own schedule never matches it. Worth a line,
			// not a warning (a healthy run logs none).
			c.log.Info("cds api says the hatchery is not up to date (it compares with its own version)", "version", c.cfg.Version)
		}
	}
	c.log.Debug("signed in to cds api", "api", v.String())
	return nil
}

// call runs an authenticated request on the session of v. On 401 it signs in
// again once and retries once.
func (c *Client) call(ctx context.Context, v apiVersion, method, path string, query url.Values, body, out any) error {
	tok := c.session(v)
	if tok == "" {
		if (v == v1 && c.cfg.Token == "") || (v == v2 && c.cfg.TokenV2 == "") {
			return fmt.Errorf("%s %s: %w (%s)", method, path, ErrNoSession, v)
		}
		if err := c.signIn(ctx, v, ""); err != nil {
			return err
		}
		tok = c.session(v)
	}
	err := c.send(ctx, v, method, path, query, body, out, true)
	if !errors.Is(err, ErrNotAuthenticated) {
		return err
	}
	c.log.Info("cds api session rejected, signing in again", "api", v.String(), "method", method, "path", path)
	if serr := c.signIn(ctx, v, tok); serr != nil {
		return errors.Join(err, serr)
	}
	return c.send(ctx, v, method, path, query, body, out, true)
}

// reqURL joins the base URL and an already escaped path.
func (c *Client) reqURL(path string, query url.Values) (*url.URL, error) {
	u, err := url.Parse(c.base.String() + path)
	if err != nil {
		return nil, err
	}
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return u, nil
}

// send does one HTTP exchange. path is escaped. out may be nil.
func (c *Client) send(ctx context.Context, v apiVersion, method, path string, query url.Values, body, out any, auth bool) error {
	if c.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
	}
	u, err := c.reqURL(path, query)
	if err != nil {
		return fmt.Errorf("%s %s: build url: %w", method, path, err)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "hatchery-vsphere")
	if auth {
		req.Header.Set("Authorization", "Bearer "+c.session(v))
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		// *url.Error names the URL, which never carries a secret.
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	c.log.Debug("cds api call", "method", method, "path", path, "status", resp.StatusCode, "duration", time.Since(start))
	if resp.StatusCode >= 300 {
		return newAPIError(method, path, resp.StatusCode, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(trimmed, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// newAPIError decodes an error body; a body that is not the API's error
// shape keeps at most a short excerpt as the message.
func newAPIError(method, path string, status int, body []byte) *APIError {
	e := &APIError{Method: method, Path: path, Status: status}
	var b sdk.APIError
	if err := json.Unmarshal(body, &b); err == nil && (b.ID != 0 || b.Message != "") {
		e.ID, e.Message, e.RequestID, e.From = b.ID, b.Message, b.RequestID, b.From
		return e
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		// Cut on a rune boundary (at most UTFMax-1 bytes back, so that
		// invalid UTF-8 still leaves an excerpt): a message cut mid-rune
		// is not valid text.
		cut := 200
		for i := 1; i < utf8.UTFMax && !utf8.RuneStart(msg[cut]); i++ {
			cut--
		}
		msg = msg[:cut]
	}
	e.Message = msg
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }
