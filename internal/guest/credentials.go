package guest

import (
	"context"
	"fmt"
	"regexp"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// secretRef matches a reference to a V1 model secret as GET
// /worker/model/enabled shows it in the model's password:
// "{{.secrets.vsphere_password}}" (spaces inside the braces allowed). The
// value is the secret named "secrets.vsphere_password" of GET
// /worker/model/{group}/{name}/secret.
var secretRef = regexp.MustCompile(`\{\{\s*\.(secrets\.[A-Za-z0-9_.-]+)\s*\}\}`)

// Access is how the hatchery signs in to a worker's guest OS and what it
// runs there before the worker. It holds a secret: never log it.
type Access struct {
	// Auth is the guest account; nil for a cloud-init worker.
	Auth *vctypes.GuestAuth
	// PreStartScript runs before the worker (Script).
	PreStartScript string
	// Source says where the credentials came from, for logs ("config" or
	// "model"); never the credentials themselves.
	Source string
}

// Secrets reads a V1 model's secrets from the CDS API.
// cdsclient.Interface implements it.
type Secrets interface {
	// WorkerModelSecretList reads the secrets of the model
	// group/name.
	WorkerModelSecretList(ctx context.Context, groupName, modelName string) ([]sdk.WorkerModelSecret, error)
}

// Credentials resolves the guest account of a model:
// the first guestCredentials entry, then the first models entry (alias),
// matched on the model; else the model's own username/password, where a V1
// model's secret references are replaced by the model's secrets read from
// the API (resolveModelSecrets). The preStartScript of the matching entry
// is kept even when the account comes from the model. No account is an
// error that names the model, never the secret.
func Credentials(ctx context.Context, cfg *config.Config, secrets Secrets, model sdk.WorkerStarterWorkerModel) (Access, error) {
	return CredentialsOf(ctx, cfg.ModelEntry(model), secrets, model)
}

// CredentialsOf is Credentials with the model's entry looked up already
// (config.Config.ModelEntry; nil: none): a spawn takes it from its plan.
func CredentialsOf(ctx context.Context, matched *config.GuestCredential, secrets Secrets, model sdk.WorkerStarterWorkerModel) (Access, error) {
	var ga Access
	if matched != nil {
		ga.PreStartScript = matched.PreStartScript
		if matched.Username != "" {
			ga.Auth = &vctypes.GuestAuth{Username: matched.Username, Password: matched.Password}
			ga.Source = "config"
			return ga, nil
		}
	}
	if u := model.GetVSphereUsername(); u != "" {
		password, err := resolveModelSecrets(ctx, secrets, model, model.GetVSpherePassword())
		if err != nil {
			return ga, err
		}
		ga.Auth = &vctypes.GuestAuth{Username: u, Password: password}
		ga.Source = "model"
		return ga, nil
	}
	return ga, fmt.Errorf("no guest credentials for model %q (image %q): set guestCredentials in the hatchery config or username/password in the model", model.GetName(), model.GetVSphereImage())
}

// resolveModelSecrets replaces the secret references (secretRef) in s, a
// field of a V1 model, by the values of the model's secrets (one API call,
// only when s holds a reference). A V2 model's fields come resolved. An
// error names the model and the secret, never a value.
func resolveModelSecrets(ctx context.Context, cds Secrets, model sdk.WorkerStarterWorkerModel, s string) (string, error) {
	if !model.IsV1() || !secretRef.MatchString(s) {
		return s, nil
	}
	m := model.ModelV1
	if cds == nil {
		return "", fmt.Errorf("model %q: its password references a secret and the hatchery has no CDS API client", m.Path())
	}
	if m.Group == nil || m.Group.Name == "" {
		return "", fmt.Errorf("model %q: its password references a secret and the model has no group to read secrets from", m.Path())
	}
	secrets, err := cds.WorkerModelSecretList(ctx, m.Group.Name, m.Name)
	if err != nil {
		return "", fmt.Errorf("model %q: read its secrets: %w", m.Path(), err)
	}
	values := make(map[string]string, len(secrets))
	for _, sec := range secrets {
		values[sec.Name] = sec.Value
	}
	var missing []string
	out := secretRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := secretRef.FindStringSubmatch(ref)[1]
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("model %q: its password references %q, which the API does not have (it has %d secrets)", m.Path(), missing, len(secrets))
	}
	return out, nil
}
