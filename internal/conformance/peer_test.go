//go:build conformance

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// peer is the real CDS (API, CDN, PostgreSQL, Redis) started by the
// cds-real folder's `up`, and what the suite does with it as an
// administrator.
type peer struct {
	dir    string // the cds-real folder
	state  string // its STATE directory
	cfg    cdsJSON
	commit string // the CDS commit it was built from (VERSION)
	admin  string // an admin session token
	http   *http.Client
}

// cdsJSON is the part of STATE/cds.json the suite reads.
type cdsJSON struct {
	APIURL       string `json:"api_url"`
	CDNURL       string `json:"cdn_url"`
	CDNTCPAddr   string `json:"cdn_tcp_addr"`
	HatcheryName string `json:"hatchery_name"`
	V1Token      string `json:"v1_token"`
	V2Token      string `json:"v2_token"`
	Region       string `json:"region"`
	OtherRegion  string `json:"other_region"`
	Project      string `json:"project"`
	Group        string `json:"group"`
	EngineConfig string `json:"engine_config"`
	Admin        struct {
		Username string `json:"username"`
		Password string `json:"password"`
	} `json:"admin"`
	Cdsctl struct {
		Wrapper string `json:"wrapper"`
	} `json:"cdsctl"`
	V2inject struct {
		Binary string `json:"binary"`
	} `json:"v2inject"`
	Logs struct {
		API string `json:"api"`
		CDN string `json:"cdn"`
	} `json:"logs"`
}

// findPeer returns the cds-real folder: $CDS_REAL, else ../shared/cds-real
// beside the repository ("" when neither exists).
func findPeer() (string, error) {
	if d := os.Getenv("CDS_REAL"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "up")); err != nil {
			return "", fmt.Errorf("CDS_REAL=%s: no up script: %w", d, err)
		}
		return d, nil
	}
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository: %w", err)
	}
	d := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "shared", "cds-real")
	if _, err := os.Stat(filepath.Join(d, "up")); err != nil {
		return "", nil
	}
	return d, nil
}

// startPeer runs `up state` and reads what it wrote.
func startPeer(ctx context.Context, dir, state string, log io.Writer) (*peer, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "up"), state)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s/up %s: %w", dir, state, err)
	}
	p := &peer{dir: dir, state: state, http: &http.Client{Timeout: 30 * time.Second}}
	b, err := os.ReadFile(filepath.Join(state, "cds.json"))
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p.cfg); err != nil {
		return p, fmt.Errorf("cds.json: %w", err)
	}
	v, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		return p, err
	}
	if m := regexp.MustCompile(`commit ([0-9a-f]{40})`).FindSubmatch(v); m != nil {
		p.commit = string(m[1])
	}
	var s struct {
		Token string `json:"token"`
	}
	body := map[string]string{"username": p.cfg.Admin.Username, "password": p.cfg.Admin.Password}
	if err := p.do(ctx, http.MethodPost, "/auth/consumer/local/signin", body, &s); err != nil {
		return p, fmt.Errorf("admin sign-in: %w", err)
	}
	p.admin = s.Token
	return p, nil
}

// stop runs `down state`.
func (p *peer) stop(log io.Writer) {
	cmd := exec.Command(filepath.Join(p.dir, "down"), p.state)
	cmd.Stdout, cmd.Stderr = log, log
	_ = cmd.Run()
}

// apiError is a non-2xx answer.
type apiError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, strings.TrimSpace(e.Body))
}

// do calls the API as the administrator; out may be nil.
func (p *peer) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.cfg.APIURL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if p.admin != "" {
		req.Header.Set("Authorization", "Bearer "+p.admin)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &apiError{Method: method, Path: path, Status: resp.StatusCode, Body: string(b)}
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, out)
}

// cdsctl runs the administrator's cdsctl in dir ("" for the state dir).
func (p *peer) cdsctl(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, p.cfg.Cdsctl.Wrapper, args...)
	cmd.Dir = dir
	if dir == "" {
		cmd.Dir = p.state
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("cdsctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// v2Job is one V2 run job inserted by v2inject.
type v2Job struct {
	Workflow, RunID, RunJobID string
}

// injectV2 inserts a V2 run with one Waiting job whose model names image;
// memory and flavor ("" for none) go to its runs-on.
func (p *peer) injectV2(ctx context.Context, workflow, image, memory, flavor string) (v2Job, error) {
	args := []string{"-config", p.cfg.EngineConfig, "-project", p.cfg.Project, "-region", p.cfg.Region,
		"-user", p.cfg.Admin.Username, "-workflow", workflow,
		"-model", p.cfg.Project + "/github/ovh/demo/vsphere-v2@refs/heads/main", "-image", image}
	if memory != "" {
		args = append(args, "-memory", memory)
	}
	if flavor != "" {
		args = append(args, "-flavor", flavor)
	}
	out, err := exec.CommandContext(ctx, p.cfg.V2inject.Binary, args...).CombinedOutput()
	if err != nil {
		return v2Job{}, fmt.Errorf("v2inject %s: %w: %s", workflow, err, out)
	}
	m := regexp.MustCompile(`run=(\S+) runjob=(\S+)`).FindSubmatch(out)
	if m == nil {
		return v2Job{}, fmt.Errorf("v2inject %s: no run in %q", workflow, out)
	}
	return v2Job{Workflow: workflow, RunID: string(m[1]), RunJobID: string(m[2])}, nil
}

// v1Run is the part of a V1 workflow run the suite reads.
type v1Run struct {
	Status string `json:"status"`
	Nodes  map[string][]struct {
		Stages []struct {
			RunJobs []v1RunJob `json:"run_jobs"`
		} `json:"stages"`
	} `json:"nodes"`
}

// v1RunJob is one job of a V1 run.
type v1RunJob struct {
	ID         int64  `json:"id"`
	Status     string `json:"status"`
	SpawnInfos []struct {
		Message struct {
			ID   string   `json:"id"`
			Args []string `json:"args"`
		} `json:"message"`
		UserMessage string `json:"user_message"`
	} `json:"spawninfos"`
}

// jobs returns the run's jobs.
func (r v1Run) jobs() []v1RunJob {
	var out []v1RunJob
	for _, ns := range r.Nodes {
		for _, n := range ns {
			for _, s := range n.Stages {
				out = append(out, s.RunJobs...)
			}
		}
	}
	return out
}

// v1RunOf reads run number n of workflow wf.
func (p *peer) v1RunOf(ctx context.Context, wf string, n int) (v1Run, error) {
	var r v1Run
	err := p.do(ctx, http.MethodGet, fmt.Sprintf("/project/%s/workflows/%s/runs/%d", p.cfg.Project, wf, n), nil, &r)
	return r, err
}

// runV1 starts workflow wf and returns its run number.
func (p *peer) runV1(ctx context.Context, wf string) (int, error) {
	var r struct {
		Number int `json:"num"`
	}
	if err := p.do(ctx, http.MethodPost, fmt.Sprintf("/project/%s/workflows/%s/runs", p.cfg.Project, wf), map[string]any{}, &r); err != nil {
		return 0, err
	}
	return r.Number, nil
}

// v2Status reads the status of a V2 run and of its job "build".
func (p *peer) v2Status(ctx context.Context, j v2Job) (run, job string, err error) {
	var r struct {
		Status string `json:"status"`
	}
	if err := p.do(ctx, http.MethodGet, fmt.Sprintf("/v2/project/%s/run/%s", p.cfg.Project, j.RunID), nil, &r); err != nil {
		return "", "", err
	}
	var jobs []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := p.do(ctx, http.MethodGet, fmt.Sprintf("/v2/project/%s/run/%s/job", p.cfg.Project, j.RunID), nil, &jobs); err != nil {
		return r.Status, "", err
	}
	for _, rj := range jobs {
		if rj.ID == j.RunJobID {
			return r.Status, rj.Status, nil
		}
	}
	return r.Status, "", fmt.Errorf("run %s has no job %s", j.RunID, j.RunJobID)
}

// v2Infos reads the infos of a V2 run job (those a hatchery sent included).
func (p *peer) v2Infos(ctx context.Context, j v2Job) ([]string, error) {
	var infos []struct {
		Level   string `json:"level"`
		Message string `json:"message"`
	}
	if err := p.do(ctx, http.MethodGet, fmt.Sprintf("/v2/project/%s/run/%s/job/%s/infos", p.cfg.Project, j.RunID, j.RunJobID), nil, &infos); err != nil {
		return nil, err
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.Level+": "+i.Message)
	}
	return out, nil
}

// apiAnswer is one line of the API's request log.
type apiAnswer struct {
	Method, URI, Handler string
	Status               int
	Consumer, Service    string
	Cause                string // the reason logged just before, for a 4xx/5xx
}

// requestEnd matches the line the API writes at the end of every request:
// "METHOD | END   | /path [handler] | [status] key=value ...".
var (
	requestEnd = regexp.MustCompile(`\b([A-Z]+) \| END +\| (\S+) \[([^\]]*)\] \| \[(\d+)\]`)
	logField   = regexp.MustCompile(`(\w+)=(\S*)`)
	ansiColour = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

// apiAnswers reads the API's request log from byte offset from on.
func (p *peer) apiAnswers(from int64) ([]apiAnswer, int64, error) {
	f, err := os.Open(p.cfg.Logs.API)
	if err != nil {
		return nil, from, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, from, err
	}
	var out []apiAnswer
	var prev string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n := from
	for sc.Scan() {
		line := ansiColour.ReplaceAllString(sc.Text(), "")
		n += int64(len(sc.Bytes())) + 1
		m := requestEnd.FindStringSubmatch(line)
		if m == nil {
			prev = line
			continue
		}
		a := apiAnswer{Method: m[1], URI: m[2], Handler: m[3]}
		a.Status, _ = strconv.Atoi(m[4])
		for _, f := range logField.FindAllStringSubmatch(line, -1) {
			switch f[1] {
			case "auth_consumer_id":
				a.Consumer = f[2]
			case "auth_service_name":
				a.Service = f[2]
			}
		}
		if a.Status >= 400 {
			a.Cause = strings.TrimSpace(prev)
		}
		out = append(out, a)
		prev = ""
	}
	return out, n, sc.Err()
}

// queuedV1 returns the V1 jobs in the API's queue as the administrator
// sees it: job id -> the name of the hatchery that booked it ("" for
// none). The run's own view does not show bookings.
func (p *peer) queuedV1(ctx context.Context) (map[int64]string, error) {
	var q []struct {
		ID       int64 `json:"id"`
		BookedBy struct {
			Name string `json:"name"`
		} `json:"bookedby"`
	}
	if err := p.do(ctx, http.MethodGet, "/queue/workflows", nil, &q); err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for _, j := range q {
		out[j.ID] = j.BookedBy.Name
	}
	return out, nil
}
