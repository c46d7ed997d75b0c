package cdsclient

import (
	"errors"
	"fmt"
)

// Sentinel errors for API answers the callers act on.
var (
	// ErrNotAuthenticated is a 401: the client signs in again.
	ErrNotAuthenticated = errors.New("not authenticated")
	// ErrForbidden is a 403 (a missing V1 job answers 403 too).
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound is a 404.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyBooked: the job was booked or taken by someone else.
	ErrAlreadyBooked = errors.New("job already booked")
	// ErrAlreadyReleased: the V1 booking the hatchery gives back is no
	// longer held (the API dropped it, or it was released before). The job
	// is not the hatchery's to release any more: nothing is left to do.
	ErrAlreadyReleased = errors.New("job already released")
	// ErrServer is any 5xx.
	ErrServer = errors.New("server error")
)

// API error ids the sentinels are classified by (the API's error
// catalogue; the message text is never read).
const (
	apiErrIDAlreadyBooked   = 89
	apiErrIDAlreadyReleased = 135
)

// APIError is an error answer of the CDS API:
// {"id": int, "message": string, "request_id": uuid, "from"?: string}.
type APIError struct {
	Method    string
	Path      string
	Status    int
	ID        int    `json:"id"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
	From      string `json:"from"`
}

// Error names the call, the status and the API's message.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("cds api %s %s: %d", e.Method, e.Path, e.Status)
	if e.Message != "" {
		msg += " " + e.Message
	}
	if e.From != "" {
		msg += " (" + e.From + ")"
	}
	return msg
}

// Is maps the status and the API error id to the sentinels.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotAuthenticated:
		return e.Status == 401
	case ErrForbidden:
		return e.Status == 403
	case ErrNotFound:
		return e.Status == 404
	case ErrAlreadyBooked:
		return e.ID == apiErrIDAlreadyBooked || e.Status == 409
	case ErrAlreadyReleased:
		return e.ID == apiErrIDAlreadyReleased
	case ErrServer:
		return e.Status >= 500
	}
	return false
}
