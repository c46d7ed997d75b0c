package sdk

import (
	"encoding/json"
	"time"
)

// Service types and the consumer type a hatchery signs in with.
const (
	// TypeHatchery is the V1 service type of a hatchery.
	TypeHatchery = "hatchery"
)

// AuthConsumerSigninRequest is the body of POST /auth/consumer/builtin/signin
// (V1): the builtin consumer token and the service to register.
type AuthConsumerSigninRequest struct {
	Token   string  `json:"token"`
	Service Service `json:"service"`
}

// AuthConsumerSigninResponse is the answer of POST /auth/consumer/builtin/signin.
// Token is the session JWT; User is kept raw (a hatchery does not read it).
type AuthConsumerSigninResponse struct {
	APIURL  string          `json:"api_url"`
	Token   string          `json:"token"`
	User    json.RawMessage `json:"user,omitempty"`
	Service *Service        `json:"service,omitempty"`
}

// V2HatcherySigninRequest is the body of POST /v2/auth/consumer/hatchery/signin.
// PublicKey is the PEM bytes of the hatchery's RSA public key (base64 on the
// wire, being a []byte).
type V2HatcherySigninRequest struct {
	Token     string `json:"token"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	HTTPURL   string `json:"http_url"`
	Config    any    `json:"config"`
	PublicKey []byte `json:"public_key"`
	Version   string `json:"version"`
}

// V2Hatchery is a V2 hatchery as the API describes it (its state before the
// sign-in that returns it).
type V2Hatchery struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	ModelType     string    `json:"model_type"`
	Config        any       `json:"config,omitempty"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	PublicKey     []byte    `json:"public_key,omitempty"`
	HTTPURL       string    `json:"http_url"`
}

// V2HatcherySigninResponse is the answer of POST /v2/auth/consumer/hatchery/signin.
type V2HatcherySigninResponse struct {
	UpToDate bool       `json:"up_to_date"`
	APIURL   string     `json:"api_url"`
	Token    string     `json:"token"`
	Hatchery V2Hatchery `json:"hatchery"`
	Region   string     `json:"region"`
}

// APIError is the error body of every CDS API error answer.
type APIError struct {
	ID        int    `json:"id"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
	From      string `json:"from,omitempty"`
}

// WebsocketFilter is one subscription sent on the V1 websocket /ws.
type WebsocketFilter struct {
	Type         string `json:"type"`
	HatcheryType string `json:"hatchery_type,omitempty"`
}

// WebsocketFilterTypeQueue subscribes to the V1 job queue.
const WebsocketFilterTypeQueue = "queue"

// Event is a CDS event as pushed on the V1 websocket; only what a hatchery reads.
type Event struct {
	Timestamp time.Time       `json:"timestamp"`
	EventType string          `json:"type_event"`
	Status    string          `json:"status,omitempty"`
	Payload   json.RawMessage `json:"payload"`
}

// EventTypeRunWorkflowJob is the event type of a V1 job change.
const EventTypeRunWorkflowJob = "sdk.EventRunWorkflowJob"

// WebsocketEvent is one message of the V1 websocket /ws.
type WebsocketEvent struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Event  Event  `json:"event"`
}

// EventRunWorkflowJob is the payload of a V1 job event.
type EventRunWorkflowJob struct {
	ID     int64  `json:"id"`
	Status string `json:"status,omitempty"`
}

// WebsocketJobQueueEvent is one message of the V2 websocket /v2/hatchery/ws.
type WebsocketJobQueueEvent struct {
	Region     string `json:"region"`
	ModelType  string `json:"model_type"`
	JobRunID   string `json:"job_run_id"`
	RunNumber  int64  `json:"run_number,omitempty"`
	RunAttempt int64  `json:"run_attempt,omitempty"`
}

// Job statuses (V1 and V2 share the words a hatchery reads).
const (
	StatusFail    = "Fail"
	StatusSuccess = "Success"
	// V2StatusScheduling is a V2 job taken by a hatchery.
	V2StatusScheduling = "Scheduling"
)

// Result is the body of POST /queue/workflows/{id}/result. A hatchery only
// sends failed results, for jobs it gives up on: Status "Fail", Reason set.
// The API reads buildID and remoteTime in camel case: with other keys it
// reads build 0 and answers 409 "Resource locked".
type Result struct {
	ID         int64     `json:"id"`
	BuildID    int64     `json:"buildID"`
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	RemoteTime time.Time `json:"remoteTime"`
	Duration   string    `json:"duration,omitempty"`
}
