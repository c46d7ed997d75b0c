package vcheck

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// programTimeout bounds the wait for a guest program's end: the programs
// of the check do nothing, or fetch the worker once (the fetch itself is
// bounded at 30 s in the guest).
const programTimeout = 2 * time.Minute

// programPoll is how often a program's end is read (ListProcessesInGuest).
const programPoll = 100 * time.Millisecond

// outputFile is the file in the guest the check's program writes its
// output to, named by the run.
func outputFile(runID string, windows bool) string {
	if windows {
		return `C:\Windows\Temp\` + FolderPrefix + runID + ".out"
	}
	return "/tmp/" + FolderPrefix + runID + ".out"
}

// wordChars are the characters of a word the check's guest programs
// write or compare: none a shell or PowerShell quotes.
const wordChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"

// program starts, with the model's account, a program that writes a word
// of the run to a file in the guest, reads its exit code, then reads the
// file back through vCenter (InitiateFileTransferFromGuest) and compares
// it: the program ran, not only started. A vCenter that hands out no
// guest file makes the line unsupported, never pass.
func (r *runner) program(ctx context.Context, t checkedTemplate, vm vctypes.Ref) {
	start := time.Now()
	windows := t.settings.OS == config.OSWindows
	word, path := "out-"+r.o.RunID, outputFile(r.o.RunID, windows)
	if strings.Trim(word, wordChars) != "" {
		res := r.add("guest program", t.name, start, Fail, fmt.Sprintf("the run id %q gives no word the guest can write", r.o.RunID))
		res.Needed = true
		return
	}
	p := vctypes.GuestProgram{Path: "/bin/sh", Args: `-c "printf %s ` + word + ` > ` + path + `"`}
	if windows {
		p = vctypes.GuestProgram{Path: guest.PowerShellProgram, Args: `-NoProfile -NonInteractive -Command "Set-Content -NoNewline -Path '` + path + `' -Value '` + word + `'"`}
	}
	code, err := r.run(ctx, t, vm, p)
	switch {
	case err != nil:
		r.outcome("guest program", t.name, start, err,
			"check the model's guest account (username, password) and that "+p.Path+" exists in the template").Needed = true
		return
	case code != 0:
		res := r.add("guest program", t.name, start, Fail, fmt.Sprintf("%s %s exited with %d", p.Path, p.Args, code))
		res.Needed, res.Fix = true, "check that the template's shell runs programs for the model's guest account and may write "+path
		return
	}
	got, err := r.readGuestFile(ctx, vm, t.auth(), path)
	switch {
	case err != nil:
		res := r.outcome("guest program", t.name, start, err, "")
		res.Detail = "exit code 0; its output not read back: " + res.Detail
		if res.Status == Fail {
			res.Needed = true
			res.Fix = "check that the model's guest account may read " + path + " and that this machine reaches the VM's host on 443 (guest file transfers)"
		}
	case got != word:
		res := r.add("guest program", t.name, start, Fail, fmt.Sprintf("exit code 0, but %s holds %q, not %q", path, got, word))
		res.Needed, res.Fix = true, "check that the template's shell runs programs as the model's guest account"
	default:
		r.add("guest program", t.name, start, Pass, p.Path+" ran, exit code 0, its output read back from "+path)
	}
}

// apiFromGuest fetches the CDS API's worker download URL, the one the
// worker is given (hatchery.WorkerAPI), from inside the guest: the
// network from the VM to CDS.
func (r *runner) apiFromGuest(ctx context.Context, t checkedTemplate, vm vctypes.Ref) {
	start := time.Now()
	api := hatchery.WorkerAPI(r.cfg.CommonConfiguration)
	if api.URL == "" || strings.ContainsAny(api.URL, `'"`+"`$\\ ") {
		res := r.add("api from guest", t.name, start, Fail, fmt.Sprintf("the worker's API URL %q cannot be fetched", api.URL))
		res.Needed, res.Fix = true, "set commonConfiguration.api.http.url (or provision.workerApiHttp.url) to the CDS API's URL"
		return
	}
	base := strings.TrimSuffix(api.URL, "/") + "/download/worker/"
	var p vctypes.GuestProgram
	var url string
	if t.settings.OS == config.OSWindows {
		url = base + "windows/amd64"
		p = vctypes.GuestProgram{Path: guest.PowerShellProgram, Args: `-NoProfile -NonInteractive -Command "try { Invoke-WebRequest -UseBasicParsing -TimeoutSec 30 -Uri '` +
			url + `' -OutFile $env:TEMP\hatchery-vsphere-check.bin; exit 0 } catch { exit 1 }"`}
	} else {
		url = base + "linux/$(uname -m)"
		k, nc := "", ""
		if api.Insecure {
			k, nc = " -k", " --no-check-certificate"
		}
		p = vctypes.GuestProgram{Path: "/bin/sh", Args: `-c 'curl -fsS` + k + ` --max-time 30 -o /dev/null "` + url + `" || wget -q` + nc + ` -T 30 -O /dev/null "` + url + `"'`}
	}
	code, err := r.run(ctx, t, vm, p)
	switch {
	case err != nil:
		r.outcome("api from guest", t.name, start, err, "").Needed = true
	case code != 0:
		res := r.add("api from guest", t.name, start, Fail, fmt.Sprintf("the guest could not fetch %s (exit code %d)", url, code))
		res.Needed = true
		res.Fix = "open the network from the VMs' network (networkString, placements[].network) to the CDS API, " +
			"or set provision.workerApiHttp.url to an address the workers reach; the template needs curl or wget"
	default:
		r.add("api from guest", t.name, start, Pass, "fetched "+url)
	}
}

// run starts p in the guest with t's account and waits for its exit
// code (bounded by programTimeout).
func (r *runner) run(ctx context.Context, t checkedTemplate, vm vctypes.Ref, p vctypes.GuestProgram) (int32, error) {
	auth := t.auth()
	pid, err := r.startProgram(ctx, vm, auth, p)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, programTimeout)
	defer cancel()
	tick := time.NewTicker(programPoll)
	defer tick.Stop()
	for {
		code, ended, err := r.programExit(ctx, vm, auth, pid)
		if err != nil {
			return 0, err
		}
		if ended {
			return code, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("program %d (%s) did not end within %s: %w", pid, p.Path, programTimeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// auth is the guest account of t's model (empty without an entry).
func (t checkedTemplate) auth() *vctypes.GuestAuth {
	auth := &vctypes.GuestAuth{}
	if e := t.settings.Entry; e != nil {
		auth.Username, auth.Password = e.Username, e.Password
	}
	return auth
}

// rpctoolWindows is VMware Tools' rpctool in a Windows guest.
const rpctoolWindows = `C:\Program Files\VMware\VMware Tools\rpctool.exe`

// guestinfoInGuest reads, from inside the guest, the guestinfo value
// given at clone time and compares it with vCenter's (vmware-rpctool,
// VMware Tools' rpctool on Windows): the exit code says whether the guest
// sees the worker's guestinfo.
func (r *runner) guestinfoInGuest(ctx context.Context, t checkedTemplate, vm vctypes.Ref) {
	start := time.Now()
	m, err := r.readVM(ctx, vm)
	if err != nil {
		r.outcome("guestinfo in guest", t.name, start, err, "").Needed = true
		return
	}
	want := extraConfig(m, guestinfoKey)
	if want == "" || strings.Trim(want, wordChars) != "" {
		res := r.add("guestinfo in guest", t.name, start, Fail, fmt.Sprintf("the clone's %s is %q: not a value the check can compare in the guest", guestinfoKey, want))
		res.Needed = true
		return
	}
	p := vctypes.GuestProgram{Path: "/bin/sh", Args: `-c '[ "$(vmware-rpctool "info-get ` + guestinfoKey + `")" = "` + want + `" ]'`}
	if t.settings.OS == config.OSWindows {
		p = vctypes.GuestProgram{Path: guest.PowerShellProgram, Args: `-NoProfile -NonInteractive -Command "if ((& '` + rpctoolWindows +
			`' 'info-get ` + guestinfoKey + `') -eq '` + want + `') { exit 0 } else { exit 1 }"`}
	}
	code, err := r.run(ctx, t, vm, p)
	switch {
	case err != nil:
		r.outcome("guestinfo in guest", t.name, start, err, "").Needed = true
	case code != 0:
		res := r.add("guestinfo in guest", t.name, start, Fail, fmt.Sprintf("the guest did not read %s = %q (exit code %d)", guestinfoKey, want, code))
		res.Needed, res.Fix = true, "install open-vm-tools (vmware-rpctool) or VMware Tools in the template: the worker's bootstrap reads its guestinfo"
	default:
		r.add("guestinfo in guest", t.name, start, Pass, "the guest read "+guestinfoKey+" as vCenter holds it")
	}
}
