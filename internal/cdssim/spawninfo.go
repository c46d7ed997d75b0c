package cdssim

// Spawn infos as the API renders them.

import (
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// SpawnInfoMessages are the spawn-info message ids the CDS API defines
// that concern spawning a worker, each with the English text the API
// renders it with: the API stores each info's user_message as
// fmt.Sprintf(text, args...), so a wrong argument count shows users
// "%!s(MISSING)" or "%!(EXTRA ...)". An info with another id is accepted
// (204) but stored without a message: users see nothing.
var SpawnInfoMessages = map[string]string{
	"MsgSpawnInfoHatcheryStarts":           "Hatchery %s starts spawn worker %s with model %s",
	"MsgSpawnInfoHatcheryStartsFlavor":     "The worker %q will use the flavor %q",
	"MsgSpawnInfoHatcheryErrorSpawn":       "Error while Hatchery %s spawns worker with model %s after %s, err: %s",
	"MsgSpawnInfoHatcheryStartDockerPull":  "Hatchery %s starts docker pull %s...",
	"MsgSpawnInfoHatcheryEndDockerPull":    "Hatchery %s docker pull %s done",
	"MsgSpawnInfoHatcheryEndDockerPullErr": "⚠ Hatchery %s - docker pull %s done with error: %v",
	"MsgSpawnInfoDeprecatedModel":          "⚠ Pay attention you are using a deprecated worker model (%s)",
	"MsgSpawnInfoWorkerEnd":                "✓ Worker %s finished working on this job",
	"MsgSpawnInfoJobInQueue":               "✓ Job has been queued",
	"MsgSpawnInfoJobTaken":                 "Job %s has been taken by worker %s",
	"MsgSpawnInfoJobTakenWorkerVersion":    "Worker %s version:%s os:%s arch:%s",
	"MsgSpawnInfoWorkerForJob":             "This worker %s was created to take this action",
	"MsgSpawnInfoWorkerForJobError":        "⚠ This worker %s was created to take this action, but does not have all prerequisites. Please verify the following prerequisites: %s",
	"MsgSpawnInfoJobError":                 "⚠ Unable to run this job: %s",
	"MsgSpawnInfoHatcheryCannotStart":      "No hatchery can spawn a worker corresponding your job's requirements. Please check your job's requirements.",
	"MsgSpawnErrorHatcheryRetryAttempt":    "Job execution failed by hatchery %s. Reason: %s",
}

// RenderSpawnInfo is the user_message the API stores for a spawn info:
// its id's text (SpawnInfoMessages) formatted with its arguments; false,
// and "", for an id the API does not define. A message with a wrong
// argument count renders, as on the API, with a "%!" mark.
func RenderSpawnInfo(m sdk.SpawnInfoMessage) (string, bool) {
	text, ok := SpawnInfoMessages[m.ID]
	if !ok {
		return "", false
	}
	args := make([]any, len(m.Args))
	for i, a := range m.Args {
		args[i] = a
	}
	return fmt.Sprintf(text, args...), true
}

// UnknownSpawnInfoIDs returns the spawn-info message ids received that the
// API does not define (see SpawnInfoMessages), in order.
func (s *Server) UnknownSpawnInfoIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.st.unknownSpawnInfos...)
}

// GarbledSpawnInfos returns the user messages of the spawn infos received
// that render with a wrong argument count ("%!s(MISSING)", "%!(EXTRA"),
// in order: what users would read in the CDS UI.
func (s *Server) GarbledSpawnInfos() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.st.garbledSpawnInfos...)
}
