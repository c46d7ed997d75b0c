package cdssim

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// wsV1 serves /ws: after the upgrade it reads (and ignores) the client's
// filters and pushes {"status":"OK","event":{"type_event":
// "sdk.EventRunWorkflowJob","status":...,"payload":{"id":...,"status":...}}}
// for every V1 job added or changed.
func (s *Server) wsV1(r *http.Request, _ *session) (int, any, error) {
	return s.serveWS(r, apiV1)
}

// wsV2 serves /v2/hatchery/ws: it pushes {"region","model_type",
// "job_run_id","run_number"} for every V2 job added or changed.
func (s *Server) wsV2(r *http.Request, _ *session) (int, any, error) {
	return s.serveWS(r, apiV2)
}

func (s *Server) serveWS(r *http.Request, api apiKind) (int, any, error) {
	w := respWriter(r)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, nil, errNotFound("simulator closed")
	}
	s.wg.Add(1)
	ch := make(chan []byte, 64)
	subs := s.st.subsV1
	if api == apiV2 {
		subs = s.st.subsV2
	}
	subs[ch] = struct{}{}
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(subs, ch)
		s.mu.Unlock()
	}()

	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return 0, nil, nil // the upgrader answered already
	}
	defer conn.Close()
	// The reader consumes the filters and notices the client leaving.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}()
	defer func() { _ = conn.Close(); <-gone }()
	for {
		select {
		case <-s.done:
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "closing"), time.Now().Add(time.Second))
			return 0, nil, nil
		case <-gone:
			return 0, nil, nil
		case msg := <-ch:
			_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
				return 0, nil, nil
			}
		}
	}
}

// WebsocketClients is the number of connected websocket clients (V1, V2);
// tests wait on it before adding jobs whose events they expect.
func (s *Server) WebsocketClients() (v1, v2 int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.st.subsV1), len(s.st.subsV2)
}

func (s *Server) publish(api apiKind, msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	subs := s.st.subsV1
	if api == apiV2 {
		subs = s.st.subsV2
	}
	for ch := range subs {
		select {
		case ch <- msg:
		default: // a slow client loses events; it still polls
		}
	}
}

func (s *Server) broadcastV1(id int64, status string) {
	payload, _ := json.Marshal(sdk.EventRunWorkflowJob{ID: id, Status: status})
	msg, _ := json.Marshal(sdk.WebsocketEvent{Status: "OK", Event: sdk.Event{
		Timestamp: time.Now().UTC(), EventType: sdk.EventTypeRunWorkflowJob, Status: status, Payload: payload,
	}})
	s.publish(apiV1, msg)
}

func (s *Server) broadcastV2(region, modelType, id string, runNumber int64) {
	msg, _ := json.Marshal(sdk.WebsocketJobQueueEvent{Region: region, ModelType: modelType, JobRunID: id, RunNumber: runNumber, RunAttempt: 1})
	s.publish(apiV2, msg)
}
