package custody

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// Refusal is the refusal of a job (or a provisioning) whose template is
// quarantined, as the quarantine's verdict v says.
func Refusal(v quarantine.Verdict) *refusal.Refusal {
	e := v.Entry
	if e.State == quarantine.Probing {
		return refusal.Refuse(refusal.ReasonQuarantined, "%s quarantined after %d consecutive failures (last: %s), a probe spawn is in flight",
			e.Key, e.Failures, e.Reason)
	}
	return refusal.Refuse(refusal.ReasonQuarantined, "%s quarantined until %s after %d consecutive failures (last: %s)",
		e.Key, e.Until.UTC().Format(time.RFC3339), e.Failures, e.Reason)
}

// BeginAttempt starts an attempt (a spawn or a provisioning) on the
// template named by key (warmpool.Key.QuarantineKey) in the quarantine
// book. A quarantined template gives a nil attempt and the refusal that
// says why; otherwise the attempt, to be ended by EndAttempt, and the
// verdict (a probe's entry says which quarantine it probes).
func (c *Custody) BeginAttempt(key string) (*quarantine.Attempt, quarantine.Verdict, *refusal.Refusal) {
	a, v := c.Quarantine.Begin(key)
	if a == nil {
		return nil, v, Refusal(v)
	}
	return a, v, nil
}

// EndAttempt records the outcome of a spawn or of a warm-pool
// provisioning (err nil: success) on its quarantine attempt, and logs with
// log a change of the template's state (lifted says what lifted it),
// recording the quarantined_templates gauge then. err must carry its
// vCenter fault kind (vcenter.Classify) for its cause to be told
// (spawnfault.Classify). It returns the failure's cause and, when the
// failure quarantined the template, the sentence that says so.
func (c *Custody) EndAttempt(ctx context.Context, a *quarantine.Attempt, log *slog.Logger, lifted string, err error) (spawnfault.Cause, string) {
	cause := spawnfault.Classify(ctx, err)
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	tr, e := a.End(err == nil, cause.Quarantine(), reason)
	switch tr {
	case quarantine.Entered, quarantine.Renewed:
		c.recordQuarantined()
		detail := fmt.Sprintf("%s quarantined until %s after %d consecutive failures", e.Key, e.Until.UTC().Format(time.RFC3339), e.Failures)
		log.Warn("template quarantined", logkey.Reason, refusal.ReasonQuarantined, logkey.Detail, detail, logkey.Err, err)
		return cause, detail
	case quarantine.Lifted:
		c.recordQuarantined()
		log.Info("template quarantine lifted", logkey.Detail, e.Key+" "+lifted)
	}
	return cause, ""
}

// recordQuarantined sets the quarantined_templates gauge to the count now.
func (c *Custody) recordQuarantined() {
	c.gauge.Lock()
	defer c.gauge.Unlock()
	c.Metrics.QuarantinedTemplates(len(c.Quarantine.Quarantined()))
}
