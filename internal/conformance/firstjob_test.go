//go:build conformance

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"

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

// guideNames are the variables of the guide's first-job:vars block whose
// values the scenario takes as the guide writes them: the names of its
// examples (hatchery, region, group), which the pipeline and the model
// of the guide's file blocks name too. The others are the scenario's own:
// its CDS user, a secrets file it can write, the peer's project.
var guideNames = []string{"HATCHERY", "REGION", "GROUP"}

// guideVar matches a line "NAME=value  # comment" of the vars block.
var guideVar = regexp.MustCompile(`^([A-Z_]+)=(\S*)`)

// guideModelPath matches the API paths that name one V1 model,
// /worker/model/GROUP/NAME/... (its book, spawn error, secret).
var guideModelPath = regexp.MustCompile(`^/worker/model/([^/?]+)/([^/?]+)/`)

// TestFirstJobGuide runs docs/first-job.md as an operator would: its
// CDS-side commands (the hatchery's own group and its permission on the
// project, region, V1 consumer and token, V2 hatchery, token and RBAC, the
// V1 model), extracted from the document, against the real CDS as its
// administrator, with the names of the guide's examples; a hatchery of
// the guide's name and region in a vCenter folder of its own, started
// with the tokens those commands wrote and the RSA key `config new
// --rsa-key` made, and the guide's guest account entry for the V1 model;
// then the guide's first job (its pipeline, workflow and cdsctl commands)
// to Success, and a V2 job in the guide's region to Success. The suite's
// own daemon is stopped meanwhile, so that the guide's hatchery alone runs
// the job.
//
// The two setups live in one CDS and one vCenter, in any order of the
// scenarios: the guide's hatchery is of its own group (its consumer's
// --groups) and its model is restricted, so the API shows the suite's
// hatchery (of shared.infra) no model of the guide's, and the guide's
// hatchery none of shared.infra's. The scenario checks the second in the
// API's request log (every model the guide's hatchery booked or reported
// on is the guide's); the suite's scenarios after it check the first (a
// hatchery of shared.infra that registered the guide's model would build
// its template and its model's jobs would find it: see docs/first-job.md,
// "A group of its own"). The guide's model stays in CDS for that reason.
func TestFirstJobGuide(t *testing.T) {
	scenario(t, "docs/first-job.md's CDS-side commands, run as written, then its first job ends Success on the hatchery they set up (V1, group and folder of its own), and a V2 job in its region")
	s.stopDaemon(t)
	ctx := context.Background()
	blocks := guideBlocks(t)

	// The variables the guide asks the operator to set: its examples'
	// names as written, the scenario's values for the rest.
	vars := map[string]string{
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

	var cds, run []string
	declared := map[string]bool{}
	for _, b := range blocks {
		switch {
		case b.Kind == "vars":
			for _, l := range strings.Split(b.Text, "\n") {
				m := guideVar.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				declared[m[1]] = true
				for _, k := range guideNames {
					if k == m[1] {
						vars[k] = m[2]
					}
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
	plainName := regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	for _, k := range guideNames {
		if !plainName.MatchString(vars[k]) {
			t.Fatalf("%s: the first-job:vars block sets %s=%q, want a plain name (the scenario runs the guide's examples as written)", firstJobDoc, k, vars[k])
		}
	}
	// The guide's names must not be the suite's: sharing them is what the
	// scenario isolates the two setups from.
	for k, suite := range map[string][]string{
		"HATCHERY": {s.peer.cfg.HatcheryName},
		"REGION":   {s.peer.cfg.Region, s.peer.cfg.OtherRegion},
		"GROUP":    {s.peer.cfg.Group},
	} {
		for _, v := range suite {
			if vars[k] == v {
				t.Fatalf("%s: the guide's %s is %q, the suite's own; the guide's setup needs names of its own", firstJobDoc, k, v)
			}
		}
	}
	var env []string
	for k, v := range vars {
		env = append(env, k+"="+v)
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
	if len(cds) < 5 || len(run) == 0 {
		t.Fatalf("%s: %d first-job:cds and %d first-job:run blocks, want the group, region, V1, V2 and model commands and the first job's", firstJobDoc, len(cds), len(run))
	}
	// The V1 model the guide creates: its name, from the guide's file.
	var model struct {
		Name string `json:"name"`
	}
	if b, err := os.ReadFile(filepath.Join(work, "model-debian12.json")); err != nil {
		t.Fatalf("%s: no first-job:file=model-debian12.json block: %v", firstJobDoc, err)
	} else if err := json.Unmarshal(b, &model); err != nil || model.Name == "" {
		t.Fatalf("%s: the V1 model's file: name %q, %v", firstJobDoc, model.Name, err)
	}
	modelPath := vars["GROUP"] + "/" + model.Name

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
	// configuration with the guide's name and region, a folder of its own
	// (its workers and its model's template; the guide's folderString),
	// the API reached directly, and the guide's guest account entry for
	// its V1 model (the simulator's guest account; the model itself holds
	// none). The folder is created while no clone runs (the suite's daemon
	// is stopped and its VMs gone): vcsim reads a folder's children
	// unlocked during a clone into it (vcsimtest's createLockFolder).
	folder := path.Join(s.env.Folder, vars["HATCHERY"])
	if err := createFolder(ctx, folder); err != nil {
		t.Fatalf("create the guide's folder %s: %v", folder, err)
	}
	monPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	var cfg bytes.Buffer
	if err := configTemplate.Execute(&cfg, configData{
		Endpoint: s.env.Endpoint, User: s.env.User, CAFile: s.env.CAFile,
		Datacenter: s.env.Datacenter, Datastore: s.env.Datastore, Network: s.env.Network,
		ResourcePool: s.env.ResourcePool, Folder: folder, CardName: vcsimtest.CardName,
		Name: vars["HATCHERY"], API: s.peer.cfg.APIURL, Proxy: s.peer.cfg.APIURL, Region: vars["REGION"],
		CloudTemplate: cloudTemplate, MonPort: monPort,
		WindowsTemplate: windowsTemplate, GuestUser: vcsimtest.DefaultGuestUser, GuestPassword: vcsimtest.DefaultGuestPassword,
	}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&cfg, "  [[hatchery.vsphere.guestCredentials]]\n    modelPath = %q\n    username = %q\n    password = %q\n",
		modelPath, vcsimtest.DefaultGuestUser, vcsimtest.DefaultGuestPassword)
	cfgPath := filepath.Join(work, "hatchery.toml")
	if err := os.WriteFile(cfgPath, cfg.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	daemonEnv := append([]string{
		"CDS_HATCHERY_VSPHERE_PASSWORD=" + s.env.Password,
		"CDS_HATCHERY_VSPHERE_RSA_PRIVATE_KEY_FILE=" + keyPath,
	}, secrets...)
	logPath := filepath.Join(s.dir, "hatchery-first-job.log")
	apiFrom := fileSize(s.peer.cfg.Logs.API)
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
	s.onlyItsModel(t, apiFrom, vars["HATCHERY"], modelPath)

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

// fileSize is the size of the file at p (0 when it cannot be read).
func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// createFolder creates the VM folder at p (an inventory path whose parent
// exists) in the simulator.
func createFolder(ctx context.Context, p string) error {
	finder := find.NewFinder(s.env.Admin.Client, true)
	dc, err := finder.Datacenter(ctx, s.env.Datacenter)
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)
	parent, err := finder.Folder(ctx, path.Dir(p))
	if err != nil {
		return err
	}
	_, err = parent.CreateFolder(ctx, path.Base(p))
	return err
}

// onlyItsModel fails unless, in the API's request log from byte from on,
// the hatchery service named hatchery booked the registration of
// modelPath and named no other V1 model: with a consumer of its own group
// it is shown its group's models only (the suite's shared.infra model
// among them would be registered, and its template built, a second time).
func (s *suite) onlyItsModel(t *testing.T, from int64, hatchery, modelPath string) {
	t.Helper()
	answers, _, err := s.peer.apiAnswers(from)
	if err != nil {
		t.Fatalf("read the API's request log: %v", err)
	}
	booked := 0
	others := map[string]int{}
	for _, a := range answers {
		m := guideModelPath.FindStringSubmatch(a.URI)
		if m == nil || a.Service != hatchery {
			continue
		}
		if p := m[1] + "/" + m[2]; p != modelPath {
			others[a.Method+" "+a.URI]++
		} else if a.Method == "PUT" && strings.HasSuffix(a.URI, "/book") {
			booked++
		}
	}
	if booked == 0 {
		t.Errorf("the API's log shows no registration booking of %s by %s", modelPath, hatchery)
	}
	for call, n := range others {
		t.Errorf("%s called %s (x%d): a V1 model not of its group", hatchery, call, n)
	}
}
