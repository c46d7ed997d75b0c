package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// vcenterLine is the "vCenter" line of /mon/status: AL while not connected
// (naming the credentials when vCenter refused them) or while the last
// request failed in transport, OK otherwise.
func vcenterLine(st vcenter.Status) sdk.MonitoringStatusLine {
	l := sdk.MonitoringStatusLine{Component: "vCenter", Status: sdk.MonitoringStatusAlert}
	switch {
	case !st.Connected && st.DialErr == nil:
		l.Value = "connecting to " + st.Host
	case !st.Connected && st.LoginRefused:
		// Not an outage: the credentials (never the secret) are named,
		// and what to do (docs/troubleshooting.md).
		l.Value = fmt.Sprintf("%s refused the credentials of user %q (hatchery.vsphere.user, hatchery.vsphere.password; %d attempts, retried every %s so as not to lock the account): fix them and restart", st.Host, st.User, st.Attempts, st.LoginRetry)
	case !st.Connected:
		l.Value = fmt.Sprintf("not connected to %s (%d attempts): %v", st.Host, st.Attempts, st.DialErr)
	case st.Unreachable != nil:
		l.Value = fmt.Sprintf("unreachable since %s: %v", st.Since.UTC().Format(time.RFC3339), st.Unreachable)
	default:
		l.Status = sdk.MonitoringStatusOK
		l.Value = fmt.Sprintf("connected to %s as %s", st.Host, st.User)
	}
	return l
}

// closeVCenter logs out within a bound of its own: ctx may be cancelled
// already (shutdown), and the logout must still be attempted.
func closeVCenter(ctx context.Context, c *vcenter.Client) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
	defer cancel()
	c.Close(cctx)
}

// logoutTimeout bounds the logout at shutdown: one SOAP request.
const logoutTimeout = 5 * time.Second
