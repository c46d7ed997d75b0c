package cdsclient

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// FuzzNewAPIError decodes arbitrary error bodies: never a panic, the API's
// error shape is kept as is, anything else becomes a short excerpt, and the
// sentinels follow the status and the API error id only.
func FuzzNewAPIError(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "captures", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no captures: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var c struct {
			Status       int             `json:"status"`
			ResponseBody json.RawMessage `json:"response_body"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		f.Add(c.Status, []byte(c.ResponseBody))
	}
	f.Add(502, []byte("<html><body>Bad Gateway</body></html>"))
	f.Add(409, []byte(""))
	f.Add(500, []byte(`{"id":0,"message":""}`))
	f.Add(403, []byte(`{"id":"89","message":7}`))
	f.Add(400, []byte(strings.Repeat("é", 150)))
	f.Add(400, []byte("x"+strings.Repeat("é", 150)))
	f.Add(-1, []byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := newAPIError("GET", "/worker/model/enabled", status, body)
		if e == nil || e.Method != "GET" || e.Path != "/worker/model/enabled" || e.Status != status {
			t.Fatalf("call not kept: %+v", e)
		}
		var b sdk.APIError
		if json.Unmarshal(body, &b) == nil && (b.ID != 0 || b.Message != "") {
			if e.ID != b.ID || e.Message != b.Message || e.RequestID != b.RequestID || e.From != b.From {
				t.Fatalf("API error body %s became %+v", body, e)
			}
		} else {
			if e.ID != 0 || e.RequestID != "" || e.From != "" {
				t.Fatalf("fields invented from a non-API body %q: %+v", body, e)
			}
			if len(e.Message) > 200 {
				t.Fatalf("excerpt of %d bytes", len(e.Message))
			}
			if utf8.Valid(body) && !utf8.ValidString(e.Message) {
				t.Fatalf("excerpt of valid UTF-8 %q is not valid UTF-8: %q", body, e.Message)
			}
			if strings.TrimSpace(string(body)) != "" && e.Message == "" {
				t.Fatal("non-empty body gave an empty message")
			}
		}
		msg := e.Error()
		if !strings.HasPrefix(msg, "cds api GET /worker/model/enabled: ") {
			t.Fatalf("Error() = %q", msg)
		}
		var err error = e
		checks := []struct {
			target error
			want   bool
		}{
			{ErrNotAuthenticated, status == 401},
			{ErrForbidden, status == 403},
			{ErrNotFound, status == 404},
			{ErrAlreadyBooked, e.ID == 89 || status == 409},
			{ErrServer, status >= 500},
		}
		for _, c := range checks {
			if errors.Is(err, c.target) != c.want {
				t.Fatalf("errors.Is(%v, %v) = %v", err, c.target, !c.want)
			}
		}
	})
}
