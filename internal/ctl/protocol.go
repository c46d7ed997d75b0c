package ctl

import (
	"encoding/json"
	"errors"
)

// ErrUsage marks a command's error as a wrong request (arguments the
// command does not take): the Response says Usage. Its text is "usage",
// so that "%w: placement list | …" reads "usage: placement list | …".
var ErrUsage = errors.New("usage")

// Request is what the client asks: a command and its arguments
// ("quarantine" ["lift", "debian12"]).
type Request struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
}

// Response is the server's answer: OK with the command's Text (human
// output) and Data (the same facts for scripts), or not OK with Error.
type Response struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Usage, with Error, says the request itself was wrong (an unknown
	// command, or arguments a command does not take: ErrUsage), not
	// refused: the client exits 2, as for a wrong command line.
	Usage bool            `json:"usage,omitempty"`
	Text  string          `json:"text,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// maxLine bounds a request or response line: a request is a few words, a
// response a screen of status or a list of VMs.
const maxLine = 4 << 20
