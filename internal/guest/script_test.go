package guest

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const scriptToken = "jwt-secret-token-0123456789"

// scriptWorkerConfig is a V1 job's worker config with every field set.
func scriptWorkerConfig() spawn.WorkerConfig {
	return spawn.WorkerConfig{
		Name:                "worker-42",
		Basedir:             "/var/lib/cds",
		HatcheryName:        "hv",
		APIEndpoint:         "https://cds.example:8081",
		APIEndpointInsecure: true,
		APIToken:            scriptToken,
		CDNEndpoint:         "https://cdn.example",
		Model:               "shared.infra/debian12",
		BookedJobID:         42,
		Region:              "eu",
		InjectEnvVars:       map[string]string{"HTTP_PROXY": "http://proxy:3128"},
		Log:                 spawn.WorkerLogConfig{GraylogHost: "graylog.example", GraylogPort: "12202", GraylogExtraKey: "site"},
	}
}

// v1Args are the arguments of a V1 job's spawn whose model runs cmd.
func v1Args(pre, cmd, post string) spawn.Arguments {
	m := &sdk.Model{Name: "debian12", Type: sdk.VSphere, Group: &sdk.Group{Name: "shared.infra"},
		ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12", PreCmd: pre, Cmd: cmd, PostCmd: post}}
	return spawn.Arguments{WorkerName: "worker-42", JobID: "42", Model: sdk.WorkerStarterWorkerModel{ModelV1: m}, WorkerConfig: scriptWorkerConfig()}
}

// The API's own default V1 command and the API's vSphere model pattern
// (pre-command, command, post-command) are written with {{.API}} and
// {{.FromWorkerImage}}: they render.
func TestScriptRendersTheAPIsModels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		pre, cmd, post string
		want           string
	}{
		{
			name: "api default command",
			cmd:  "curl {{.API}}/download/worker/linux/$(uname -m) -o worker --retry 10 --retry-max-time 120 && chmod +x worker && exec ./worker",
			want: "curl https://cds.example:8081/download/worker/linux/$(uname -m) -o worker --retry 10 --retry-max-time 120 && chmod +x worker && exec ./worker",
		},
		{
			name: "api vsphere pattern",
			pre: "#!/bin/bash\nset +e\nexport CDS_FROM_WORKER_IMAGE={{.FromWorkerImage}}\nexport CDS_API={{.API}}\n" +
				"if [[ \"x{{.FromWorkerImage}}\" = \"xtrue\" ]]; then\n  echo ready\nfi;\n" +
				"curl -L \"{{.API}}/download/worker/linux/$(uname -m)\" -o worker --retry 10 --retry-max-time 120 >> /tmp/user_data 2>&1\nchmod +x worker",
			cmd:  "PATH=$PATH ./worker",
			post: "sudo shutdown -h now",
			want: "#!/bin/bash\nset +e\nexport CDS_FROM_WORKER_IMAGE=true\nexport CDS_API=https://cds.example:8081\n" +
				"if [[ \"xtrue\" = \"xtrue\" ]]; then\n  echo ready\nfi;\n" +
				"curl -L \"https://cds.example:8081/download/worker/linux/$(uname -m)\" -o worker --retry 10 --retry-max-time 120 >> /tmp/user_data 2>&1\nchmod +x worker\n" +
				"PATH=$PATH ./worker\nsudo shutdown -h now",
		},
		{
			name: "vsphere tutorial exports",
			pre: "export CDS_API={{.API}}\nexport CDS_TOKEN={{.Token}}\nexport CDS_NAME={{.Name}}\nexport CDS_MODEL={{.Model}}\n" +
				"export CDS_HATCHERY_NAME={{.HatcheryName}}\nexport CDS_BOOKED_WORKFLOW_JOB_ID={{.WorkflowJobID}}\nexport CDS_INSECURE={{.HTTPInsecure}}",
			cmd: "PATH=$PATH ./worker",
			want: "export CDS_API=https://cds.example:8081\nexport CDS_TOKEN=" + scriptToken + "\nexport CDS_NAME=worker-42\nexport CDS_MODEL=shared.infra/debian12\n" +
				"export CDS_HATCHERY_NAME=hv\nexport CDS_BOOKED_WORKFLOW_JOB_ID=42\nexport CDS_INSECURE=true\nPATH=$PATH ./worker",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Script(v1Args(tt.pre, tt.cmd, tt.post), "", time.Hour)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Every field CDS's own hatcheries give models, by family, with the value
// it takes from the worker config; and the worker config's own names,
// which this hatchery's models use.
func TestScriptFields(t *testing.T) {
	t.Parallel()
	wc := scriptWorkerConfig()
	tests := []struct {
		name string
		cmd  string
		want string
	}{
		{"api access", "{{.API}} {{.HTTPInsecure}} {{.Token}}", "https://cds.example:8081 true " + scriptToken},
		{"worker identity", "{{.Name}} {{.Model}} {{.HatcheryName}} {{.WorkflowJobID}} {{.BaseDir}}", "worker-42 shared.infra/debian12 hv 42 /var/lib/cds"},
		{"lifetime and image", "{{.TTL}} {{.FromWorkerImage}} {{.WorkerBinary}} {{.OSArch}}", "90 true ./worker linux/$(uname -m)"},
		{"graylog", "{{.GraylogHost}}:{{.GraylogPort}} {{.GraylogExtraKey}}={{.GraylogExtraValue}}.", "graylog.example:12202 site=."},
		{"env vars", "{{.InjectEnvVars.HTTP_PROXY}} {{range $k, $v := .InjectEnvVars}}{{$k}}{{end}}", "http://proxy:3128 HTTP_PROXY"},
		{"config", "{{.Config}}", wc.EncodeBase64()},
		{"our names", "{{.APIEndpoint}} {{.APIEndpointInsecure}} {{.APIToken}} {{.Basedir}} {{.BookedJobID}} {{.CDNEndpoint}} {{.Region}} {{.Log.GraylogHost}}",
			"https://cds.example:8081 true " + scriptToken + " /var/lib/cds 42 https://cdn.example eu graylog.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Script(v1Args("", tt.cmd, ""), "", 90*time.Minute)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// {{.Config}} is exactly the CDS_CONFIG the launch sets: a model passing
// it on the command line gives the worker the same config.
func TestScriptConfigIsTheLaunchedConfig(t *testing.T) {
	t.Parallel()
	args := v1Args("", "worker --config={{.Config}}", "")
	got, err := Script(args, "", time.Hour)
	require.NoError(t, err)
	enc, ok := strings.CutPrefix(got, "worker --config=")
	require.True(t, ok, got)
	cfg, err := spawn.DecodeWorkerConfig(enc)
	require.NoError(t, err)
	assert.Equal(t, args.WorkerConfig, cfg)
}

// A V2 model's osarch names the worker to download; a V2 job has no V1
// job id.
func TestScriptV2Model(t *testing.T) {
	t.Parallel()
	wc := scriptWorkerConfig()
	wc.BookedJobID, wc.RunJobID = 0, "6b7f1f4e-0000-4000-8000-000000000001"
	args := spawn.Arguments{WorkerName: "worker-42", WorkerConfig: wc, Model: sdk.WorkerStarterWorkerModel{
		ModelV2: &sdk.V2WorkerModel{Name: "debian12", OSArch: "linux/arm64"},
		Cmd:     "{{.API}}/download/worker/{{.OSArch}} {{.WorkflowJobID}} {{.RunJobID}}",
	}}
	got, err := Script(args, "", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "https://cds.example:8081/download/worker/linux/arm64 0 "+wc.RunJobID, got)
}

// A command naming a field the data does not have is refused with an
// error naming the model and the field, marked as the model's commands'
// fault, without any value of the data (the token).
func TestScriptUnknownFieldIsAModelCommandError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, pre, cmd, want string }{
		{"unknown field", "", "./worker --hatchery={{.Hatchery}}", "can't evaluate field Hatchery"},
		{"does not parse", "", "./worker {{.API", "unclosed action"},
		{"in the preStartScript", "echo {{.Nope}}", "./worker", "can't evaluate field Nope"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Script(v1Args("echo {{.Token}}", tt.cmd, ""), tt.pre, time.Hour)
			require.Error(t, err)
			var mce *spawn.ModelCommandError
			assert.True(t, errors.As(err, &mce), "a *spawn.ModelCommandError: %v", err)
			assert.Contains(t, err.Error(), `worker script of model "shared.infra/debian12": model commands do not render: `)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), scriptToken)
		})
	}
}

// The template data never prints its secrets.
func TestModelTemplateDataHidesSecrets(t *testing.T) {
	t.Parallel()
	d := spawn.NewModelTemplateData(scriptWorkerConfig(), sdk.WorkerStarterWorkerModel{}, 1)
	for _, s := range []string{d.String(), strings.ReplaceAll(sprintAll(d), "\n", " ")} {
		assert.NotContains(t, s, scriptToken)
		assert.NotContains(t, s, d.Config)
	}
}

// sprintAll is d as fmt's verbs and a slog text line show it.
func sprintAll(d spawn.ModelTemplateData) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %+v %s ", d, &d, d)
	slog.New(slog.NewTextHandler(&b, nil)).Info("data", "d", d)
	return b.String()
}
