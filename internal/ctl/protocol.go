package ctl

import "encoding/json"

// Request is what the client asks: a command and its arguments
// ("quarantine" ["lift", "debian12"]).
type Request struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
}

// Response is the server's answer: OK with the command's Text (human
// output) and Data (the same facts for scripts), or not OK with Error.
type Response struct {
	OK    bool            `json:"ok"`
	Error string          `json:"error,omitempty"`
	Text  string          `json:"text,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// maxLine bounds a request or response line: a request is a few words, a
// response a screen of status or a list of VMs.
const maxLine = 4 << 20
