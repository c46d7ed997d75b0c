//go:build conformance

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// firstJobDoc is the guide whose marked blocks TestFirstJobGuide runs.
const firstJobDoc = "../../docs/first-job.md"

// guideBlock is one fenced block of the guide marked "first-job:KIND".
type guideBlock struct {
	Kind, Text string
}

// guideFence matches a fenced block whose info string is "LANG
// first-job:KIND" and captures KIND and the block's text.
var guideFence = regexp.MustCompile("(?ms)^```\\w+ first-job:(\\S+)\\n(.*?)^```")

// guideBlocks reads the marked blocks of the guide, in order.
func guideBlocks(t *testing.T) []guideBlock {
	t.Helper()
	b, err := os.ReadFile(firstJobDoc)
	if err != nil {
		t.Fatal(err)
	}
	var out []guideBlock
	for _, m := range guideFence.FindAllSubmatch(b, -1) {
		out = append(out, guideBlock{Kind: string(m[1]), Text: string(m[2])})
	}
	return out
}

// runGuideShell runs script with bash -euo pipefail in dir, cdsctl on
// PATH being the peer's administrator, env added.
func runGuideShell(t *testing.T, dir, binDir, script string, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the guide's commands failed: %v\n--- commands\n%s\n--- output\n%s", err, script, out)
	}
	return string(out)
}

// readEnvFile reads VAR=value lines (comments and blank lines skipped).
func readEnvFile(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFirstJobGuide runs docs/first-job.md as an operator would: its
// CDS-side commands (region, V1 consumer and token, V2 hatchery, token
// and RBAC, the V1 model), extracted from the document, against the real
// CDS as its administrator; a hatchery of the guide's name and region,
// started with the tokens those commands wrote and the RSA key `config
// new --rsa-key` made, and the guide's guest account entry for the V1
// model; then the guide's first job (its pipeline, workflow and cdsctl
// commands) to Success, and a V2 job in the guide's region to Success.
// The names are new ones beside those `up` made (hatchery hv-real, region
// R), so both setups live in one CDS; the suite's own daemon is stopped
// meanwhile, so that the guide's hatchery alone runs the job.
func TestFirstJobGuide(t *testing.T) {
	scenario(t, "docs/first-job.md's CDS-side commands, run as written, then its first job ends Success on the hatchery they set up (V1), and a V2 job in its region")
	s.stopDaemon(t)
	ctx := context.Background()
	blocks := guideBlocks(t)

	// The variables the guide asks the operator to set, with this
	// scenario's values.
	vars := map[string]string{
		"HATCHERY": "hv-first-job",
		"REGION":   "FIRSTJOB",
		"GROUP":    s.peer.cfg.Group,
		"CDS_USER": s.peer.cfg.Admin.Username,
		"PROJECT":  s.peer.cfg.Project,
	}
	work := t.TempDir()
	vars["SECRETS"] = filepath.Join(work, "secrets.env")
	binDir := filepath.Join(work, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(s.peer.cfg.Cdsctl.Wrapper, filepath.Join(binDir, "cdsctl")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vars["SECRETS"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for k, v := range vars {
		env = append(env, k+"="+v)
	}

	var cds, run []string
	declared := map[string]bool{}
	for _, b := range blocks {
		switch {
		case b.Kind == "vars":
			for _, l := range strings.Split(b.Text, "\n") {
				if k, _, ok := strings.Cut(l, "="); ok && regexp.MustCompile(`^[A-Z_]+$`).MatchString(k) {
					declared[k] = true
				}
			}
		case b.Kind == "cds":
			cds = append(cds, b.Text)
		case b.Kind == "run":
			run = append(run, b.Text)
		case strings.HasPrefix(b.Kind, "file="):
			if err := os.WriteFile(filepath.Join(work, strings.TrimPrefix(b.Kind, "file=")), []byte(b.Text), 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: a block marked first-job:%s, which this scenario does not know", firstJobDoc, b.Kind)
		}
	}
	var want, got []string
	for k := range vars {
		want = append(want, k)
	}
	for k := range declared {
		got = append(got, k)
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(want, " ") != strings.Join(got, " ") {
		t.Fatalf("%s: the first-job:vars block sets %v; this scenario gives %v", firstJobDoc, got, want)
	}
	if len(cds) < 4 || len(run) == 0 {
		t.Fatalf("%s: %d first-job:cds and %d first-job:run blocks, want the region, V1, V2 and model commands and the first job's", firstJobDoc, len(cds), len(run))
	}

	runGuideShell(t, work, binDir, strings.Join(cds, "\n"), env)
	secrets := readEnvFile(t, vars["SECRETS"])
	hasToken := map[string]bool{}
	for _, l := range secrets {
		k, v, _ := strings.Cut(l, "=")
		hasToken[k] = v != ""
	}
	if !hasToken["CDS_HATCHERY_VSPHERE_API_TOKEN"] || !hasToken["CDS_HATCHERY_VSPHERE_API_TOKENV2"] {
		t.Fatalf("the guide's commands wrote %d lines to the secrets file, without both tokens", len(secrets))
	}

	// The RSA key, as the guide makes it.
	keyPath := filepath.Join(work, "rsa-private-key")
	if out, err := exec.Command(s.bin, "config", "new", "--rsa-key", keyPath).CombinedOutput(); err != nil {
		t.Fatalf("config new --rsa-key: %v: %s", err, bytes.TrimSpace(lastBytes(out, 400)))
	}

	// The guide's hatchery on the simulated vCenter: the suite's
	// configuration with the guide's name and region, the API reached
	// directly, and the guide's guest account entry for its V1 model
	// (the simulator's guest account; the model itself holds none).
	monPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	var cfg bytes.Buffer
	if err := configTemplate.Execute(&cfg, configData{
		Endpoint: s.env.Endpoint, User: s.env.User, CAFile: s.env.CAFile,
		Datacenter: s.env.Datacenter, Datastore: s.env.Datastore, Network: s.env.Network,
		ResourcePool: s.env.ResourcePool, Folder: s.env.Folder, CardName: vcsimtest.CardName,
		Name: vars["HATCHERY"], API: s.peer.cfg.APIURL, Proxy: s.peer.cfg.APIURL, Region: vars["REGION"],
		CloudTemplate: cloudTemplate, MonPort: monPort,
		WindowsTemplate: windowsTemplate, GuestUser: vcsimtest.DefaultGuestUser, GuestPassword: vcsimtest.DefaultGuestPassword,
	}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&cfg, "  [[hatchery.vsphere.guestCredentials]]\n    modelPath = %q\n    username = %q\n    password = %q\n",
		vars["GROUP"]+"/vsphere-debian12", vcsimtest.DefaultGuestUser, vcsimtest.DefaultGuestPassword)
	cfgPath := filepath.Join(work, "hatchery.toml")
	if err := os.WriteFile(cfgPath, cfg.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	daemonEnv := append([]string{
		"CDS_HATCHERY_VSPHERE_PASSWORD=" + s.env.Password,
		"CDS_HATCHERY_VSPHERE_RSA_PRIVATE_KEY_FILE=" + keyPath,
	}, secrets...)
	logPath := filepath.Join(s.dir, "hatchery-first-job.log")
	d, err := startDaemon(ctx, s.bin, cfgPath, logPath, daemonEnv, monPort)
	if err != nil {
		t.Fatalf("start the guide's hatchery: %v", err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := d.stop(); err != nil {
				t.Errorf("stop the guide's hatchery: %v", err)
			}
		}
	}
	defer stop()

	// The first job, as the guide runs it.
	runGuideShell(t, work, binDir, strings.Join(run, "\n"), env)
	r := s.v1Final(t, "first-job", 1, 5*time.Minute)
	if r.Status != "Success" {
		t.Fatalf("the guide's first job ended %s; hatchery log %s", r.Status, logPath)
	}
	s.v1Logs(t, "first-job", 1, "first job on")

	// A V2 job in the guide's region, on the guide's template.
	out, err := exec.CommandContext(ctx, s.peer.cfg.V2inject.Binary, "-config", s.peer.cfg.EngineConfig,
		"-project", s.peer.cfg.Project, "-region", vars["REGION"], "-user", s.peer.cfg.Admin.Username,
		"-workflow", "wf-v2-first-job", "-model", s.peer.cfg.Project+"/github/ovh/demo/vsphere-v2@refs/heads/main",
		"-image", "debian12").CombinedOutput()
	if err != nil {
		t.Fatalf("v2inject: %v: %s", err, out)
	}
	m := regexp.MustCompile(`run=(\S+) runjob=(\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("v2inject: no run in %q", out)
	}
	j := v2Job{Workflow: "wf-v2-first-job", RunID: string(m[1]), RunJobID: string(m[2])}
	if st := s.v2Final(t, j, 3*time.Minute); st != "Success" {
		infos, _ := s.peer.v2Infos(ctx, j)
		t.Fatalf("the V2 job in region %s ended %s; infos %q", vars["REGION"], st, infos)
	}
	s.noLeak(t)
	stop()
	for _, l := range logLines(logPath) {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("the guide's hatchery logged: %s", l)
		}
		for _, sec := range append([]string{s.env.Password}, secrets...) {
			if _, v, ok := strings.Cut(sec, "="); ok && v != "" && strings.Contains(l, v) {
				t.Errorf("the guide's hatchery logged a secret")
			}
		}
	}
}

// lastBytes is the end of b, at most n bytes.
func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
