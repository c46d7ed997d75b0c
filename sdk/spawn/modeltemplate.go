package spawn

import (
	"strconv"
	"strings"
	"text/template"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// WorkerBinary is where the default V2 commands (DefaultV2Commands) put
// the worker they download, relative to the script's working directory;
// ModelTemplateData.WorkerBinary says so to the models.
const WorkerBinary = "./worker"

// DefaultOSArch is ModelTemplateData.OSArch for a model that names no
// os/arch (V1 models, V2 models without osarch): the guest's own
// architecture, as the API's default V1 command asks for it (the API
// serves the worker under linux/x86_64 as under linux/amd64).
const DefaultOSArch = "linux/$(uname -m)"

// ModelTemplateData is the value the commands a worker VM runs
// (preStartScript, then the model's PreCmd, Cmd, PostCmd; for V2 models
// the configured v2PreCmd, v2Cmd, v2PostCmd) are rendered with as Go
// templates (docs/configuration.md, "Model command templates").
//
// It offers two sets of names. The fields declared here are those CDS's
// own hatcheries give models (the API's default command uses {{.API}});
// the embedded WorkerConfig keeps the names models written for this
// hatchery use ({{.APIEndpoint}}, {{.Basedir}}, {{.APIToken}},
// {{.BookedJobID}}, ...). Name, Model, HatcheryName and InjectEnvVars are
// in both sets with one value.
//
// It holds the worker token (Token, Config, APIToken): never log it, nor
// the rendered script. String hides everything.
type ModelTemplateData struct {
	WorkerConfig

	// API is the CDS API URL the worker reaches (provision.workerApiHttp,
	// else api.http): WorkerConfig.APIEndpoint.
	API string
	// Token is the worker's JWT: WorkerConfig.APIToken. A secret.
	Token string
	// Name is the worker's name, also its VM's.
	Name string
	// BaseDir is the worker's base directory (provision.workerBasedir):
	// WorkerConfig.Basedir.
	BaseDir string
	// HTTPInsecure is true when the worker skips TLS verification of the
	// API: WorkerConfig.APIEndpointInsecure.
	HTTPInsecure bool
	// Model is the worker model's path ("group/name" for V1, the V2
	// model's name).
	Model string
	// HatcheryName is this hatchery's name.
	HatcheryName string
	// WorkflowJobID is the V1 job the worker runs; 0 for a V2 job and for
	// a registration.
	WorkflowJobID int64
	// TTL is workerTTL, in minutes.
	TTL int
	// FromWorkerImage is always true: a worker VM is cloned from the
	// model's template, already prepared.
	FromWorkerImage bool
	// GraylogHost, GraylogPort and GraylogExtraKey are the worker's
	// graylog settings (WorkerConfig.Log); GraylogPort is 0 when unset.
	GraylogHost     string
	GraylogPort     int
	GraylogExtraKey string
	// GraylogExtraValue is graylog's extraValue (upstream's
	// workerLogsOptions.graylog.extraValue); it may be a token.
	GraylogExtraValue string
	// WorkerBinary is where the default V2 commands put the worker
	// (the constant WorkerBinary).
	WorkerBinary string
	// InjectEnvVars are provision.injectEnvVars as a map.
	InjectEnvVars map[string]string
	// Config is the worker config as CDS_CONFIG carries it (base64 of its
	// JSON), token included. A secret.
	Config string
	// OSArch is the model's "os/arch" (a V2 model's osarch, e.g.
	// "linux/amd64"), DefaultOSArch when the model names none: the path
	// under {{.API}}/download/worker/ of the worker for this VM.
	OSArch string
}

// NewModelTemplateData fills the template data of a worker from its
// config, its model and workerTTL (minutes).
func NewModelTemplateData(wc WorkerConfig, model sdk.WorkerStarterWorkerModel, ttlMinutes int) ModelTemplateData {
	port, err := strconv.Atoi(wc.Log.GraylogPort)
	if err != nil {
		port = 0
	}
	osarch := DefaultOSArch
	if model.ModelV2 != nil && strings.TrimSpace(model.ModelV2.OSArch) != "" {
		osarch = strings.TrimSpace(model.ModelV2.OSArch)
	}
	return ModelTemplateData{
		WorkerConfig:    wc,
		API:             wc.APIEndpoint,
		Token:           wc.APIToken,
		Name:            wc.Name,
		BaseDir:         wc.Basedir,
		HTTPInsecure:    wc.APIEndpointInsecure,
		Model:           wc.Model,
		HatcheryName:    wc.HatcheryName,
		WorkflowJobID:   wc.BookedJobID,
		TTL:             ttlMinutes,
		FromWorkerImage: true,
		GraylogHost:     wc.Log.GraylogHost,
		GraylogPort:     port,
		GraylogExtraKey: wc.Log.GraylogExtraKey,
		// A token, maybe: only rendered into the model's commands, as upstream does.
		GraylogExtraValue: wc.Log.GraylogExtraValue,
		WorkerBinary:      WorkerBinary,
		InjectEnvVars:     wc.InjectEnvVars,
		Config:            wc.EncodeBase64(),
		OSArch:            osarch,
	}
}

// String names the worker only: the data holds its token.
func (d ModelTemplateData) String() string {
	return "model template data of worker " + strconv.Quote(d.Name)
}

// RenderModelCommand renders src, a model's commands, with data. A
// template that does not parse, a field the data does not have or a map
// key it lacks is a *ModelCommandError naming it (never a value of the
// data). The result may hold the worker token: never log it.
func RenderModelCommand(src string, data ModelTemplateData) (string, error) {
	tmpl, err := template.New("commands").Option("missingkey=error").Parse(src)
	if err != nil {
		return "", &ModelCommandError{Err: err}
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		return "", &ModelCommandError{Err: err}
	}
	return b.String(), nil
}

// ModelCommandError is a spawn error caused by a model's commands (or the
// preStartScript run before them): they do not render as a template
// (RenderModelCommand). Trying the same commands again cannot help: the
// framework reports a registration that fails so once and does not try
// that version of the model again (docs/configuration.md, "Model command
// templates").
type ModelCommandError struct {
	Err error
}

// Error is "model commands do not render: " and the template's error.
func (e *ModelCommandError) Error() string { return "model commands do not render: " + e.Err.Error() }

// Unwrap returns the template's error.
func (e *ModelCommandError) Unwrap() error { return e.Err }

// CheckModelCommand tells whether src renders as a model command: it
// parses, and every field it names exists in ModelTemplateData (rendered
// with sample values; map keys, such as InjectEnvVars entries, are not
// checked: they depend on the configuration of the worker).
func CheckModelCommand(src string) error {
	tmpl, err := template.New("command").Parse(src)
	if err != nil {
		return err
	}
	wc := WorkerConfig{
		Name: "worker", Basedir: "/tmp", HatcheryName: "hatchery", APIEndpoint: "https://cds.example",
		Model: "group/model", BookedJobID: 1,
	}
	data := NewModelTemplateData(wc, sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "model", OSArch: "linux/amd64"}}, 1)
	var b strings.Builder
	return tmpl.Execute(&b, data)
}
