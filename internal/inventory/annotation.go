package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// AnnotationMirrorKey is the ExtraConfig key that mirrors the annotation, so
// that ownership survives an operator editing the Notes field (docs/design.md#annotation).
// It is not a guestinfo.* key: the guest cannot read or change it.
const AnnotationMirrorKey = "cds.hatchery.annotation"

// maxAnnotationBytes bounds what is parsed; a real record is a few hundred bytes.
const maxAnnotationBytes = 64 << 10

// Annotation is the ownership and state record every VM created by the
// hatchery carries (docs/design.md#annotation). It is the source of truth:
// in-memory caches are accelerators rebuilt from it after a restart. It
// never holds a secret.
type Annotation struct {
	HatcheryName string `json:"hatchery_name"`
	WorkerName   string `json:"worker_name"`
	RegisterOnly bool   `json:"register_only"`
	// Provisioning flags a VM of the warm pool, idle or being made. It is
	// written under the key warm_pool: the key provisioning, which
	// earlier versions wrote and ParseAnnotation still reads, is the one
	// the upstream CDS vSphere hatchery claims VMs by
	// (docs/coexistence.md).
	Provisioning            bool      `json:"warm_pool"`
	WorkerModelPath         string    `json:"worker_model_path"`
	VMwareModelPath         string    `json:"vmware_model_path"`
	WorkerModelLastModified string    `json:"worker_model_last_modified"`
	Model                   bool      `json:"model"`
	Created                 time.Time `json:"created"`
	JobID                   string    `json:"job_id"`
	IPAddress               string    `json:"ip_address"`
	Flavor                  string    `json:"flavor,omitempty"`
	// IdleState is how a ready pool VM waits (config.IdleStateSuspended,
	// config.IdleStatePoweredOn); "" is powered off, and is also what a
	// pool VM still being provisioned carries (docs/configuration.md,
	// "Warm pool").
	IdleState string `json:"idle_state,omitempty"`
	// WorkerStarted is when the worker process was launched in the guest;
	// nil until then. Cleanup decides from it (docs/design.md#cleanup).
	WorkerStarted *time.Time `json:"worker_started,omitempty"`
	// HeldUntil, when set, says the VM is the VM of a failed spawn kept
	// powered on for inspection until then (keepFailedWorkers,
	// docs/design.md#debug-hold); the cleanup deletes it afterwards.
	HeldUntil *time.Time `json:"held_until,omitempty"`
	// HeldReason is the step of the spawn that failed, for the operator
	// (never an error text that could carry a secret).
	HeldReason string `json:"held_reason,omitempty"`
	// Placement is the [[placements]] entry the VM was cloned into
	// (config.DefaultPlacementName without entries; empty for records of
	// earlier versions, which count in the default placement).
	Placement string `json:"placement,omitempty"`
	// InstantParent flags a running parent VM that the workers of
	// instant-clone models are forked from (docs/instant-clones.md); it
	// never serves a job itself.
	InstantParent bool `json:"instant_parent,omitempty"`
	// ParentTemplate is the template an instant parent was built from
	// (with its change version, so that a changed template replaces it).
	ParentTemplate string `json:"parent_template,omitempty"`
	// SpawnedBy is the process (one run of one instance of the hatchery)
	// that spawned the worker in the VM: that process destroys the VM
	// once its worker finished, another instance of the hatchery only
	// after a grace (docs/high-availability.md, "Finished VMs"). Empty
	// for pool VMs, parents, registrations and records of earlier
	// versions.
	SpawnedBy string `json:"spawned_by,omitempty"`
}

// ModelName is the model a log line names for the VM: its V2 template
// (VMwareModelPath), else its V1 model path (WorkerModelPath).
func (a Annotation) ModelName() string {
	if a.VMwareModelPath != "" {
		return a.VMwareModelPath
	}
	return a.WorkerModelPath
}

// Held reports whether the record holds the VM for inspection (expired
// or not).
func (a *Annotation) Held() bool { return a != nil && a.HeldUntil != nil }

// ErrNoAnnotation means the VM carries no ownership record at all.
var ErrNoAnnotation = errors.New("no cds annotation")

// Marshal returns the JSON written in the Notes field and its mirror.
func (a Annotation) Marshal() string {
	b, _ := json.Marshal(a) // plain fields: cannot fail
	return string(b)
}

// ParseAnnotation decodes a record. Anything that is not a JSON object with a
// hatchery name is rejected: a foreign or corrupt note is never acted on.
func ParseAnnotation(s string) (*Annotation, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, ErrNoAnnotation
	}
	if len(s) > maxAnnotationBytes {
		return nil, fmt.Errorf("annotation of %d bytes exceeds %d", len(s), maxAnnotationBytes)
	}
	if s[0] != '{' {
		return nil, ErrNoAnnotation
	}
	var r struct {
		Annotation
		// LegacyProvisioning is Provisioning as earlier versions wrote it.
		LegacyProvisioning bool `json:"provisioning"`
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("parse annotation: %w", err)
	}
	a := r.Annotation
	if a.HatcheryName == "" {
		return nil, errors.New("parse annotation: no hatchery name")
	}
	a.Provisioning = a.Provisioning || r.LegacyProvisioning
	return &a, nil
}

// AnnotationFromVM reads the record of a VM: the Notes field first, the
// mirror among its options (extraConfig) when the Notes field is empty,
// foreign or corrupt.
func AnnotationFromVM(notes string, extra []vctypes.Option) (*Annotation, error) {
	a, err := ParseAnnotation(notes)
	if err == nil {
		return a, nil
	}
	for _, o := range extra {
		if o.Key != AnnotationMirrorKey {
			continue
		}
		if m, merr := ParseAnnotation(o.Value); merr == nil {
			return m, nil
		}
	}
	return nil, err
}

// Record is the record as a write sets it on a VM: the Notes field and
// its mirror (the adapter turns it into a config specification's,
// vim.ApplyRecord, which replaces a mirror already there).
func (a Annotation) Record() vctypes.Record {
	s := a.Marshal()
	return vctypes.Record{Notes: s, Options: []vctypes.Option{{Key: AnnotationMirrorKey, Value: s}}}
}
