package vsphere

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
)

// secretsAPI is a CDS API holding the secrets of the one model
// shared.infra/mymodel (another model is a 404), answered with err; any
// call but the secret list panics.
func secretsAPI(secrets []sdk.WorkerModelSecret, err error) *cdsclienttest.Fake {
	return &cdsclienttest.Fake{
		Secrets:    map[string][]sdk.WorkerModelSecret{"shared.infra/mymodel": secrets},
		SecretsErr: err,
		Allow:      []string{"WorkerModelSecretList"},
	}
}

// TestGuestCredentialsResolveV1ModelSecrets: /worker/model/enabled shows a
// V1 model's password as "{{.secrets.NAME}}"; the guest account uses the
// value of the model's secret NAME, read from the API only when a
// reference is there. Errors name the model and the secret, never a value.
func TestGuestCredentialsResolveV1ModelSecrets(t *testing.T) {
	t.Parallel()
	withPassword := func(p string) sdk.WorkerStarterWorkerModel {
		m := spV1Model()
		m.ModelV1.ModelVirtualMachine.Password = p
		return m
	}
	secrets := []sdk.WorkerModelSecret{{Name: "secrets.vsphere_password", Value: "s3cr3t-value"}, {Name: "secrets.other", Value: "x"}}
	tests := []struct {
		name      string
		model     sdk.WorkerStarterWorkerModel
		cds       *cdsclienttest.Fake
		want      string
		wantCalls int
		wantErr   string
	}{
		{name: "reference", model: withPassword("{{.secrets.vsphere_password}}"), want: "s3cr3t-value", wantCalls: 1},
		{name: "spaces inside the braces", model: withPassword("{{ .secrets.vsphere_password }}"), want: "s3cr3t-value", wantCalls: 1},
		{name: "inside a longer value", model: withPassword("pre-{{.secrets.other}}-post"), want: "pre-x-post", wantCalls: 1},
		{name: "a plain password is not read from the api", model: withPassword("plain"), want: "plain", wantCalls: 0},
		{name: "unknown secret", model: withPassword("{{.secrets.nope}}"), wantCalls: 1,
			wantErr: `model "shared.infra/mymodel": its password references ["secrets.nope"], which the API does not have (it has 2 secrets)`},
		{name: "api error", model: withPassword("{{.secrets.vsphere_password}}"), cds: secretsAPI(nil, errors.New("503")), wantCalls: 1,
			wantErr: `model "shared.infra/mymodel": read its secrets: 503`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newSpFixture(t, spConfig())
			cds := tt.cds
			if cds == nil {
				cds = secretsAPI(secrets, nil)
			}
			f.h.cds = cds
			f.h.pool.CDS = f.h.cds
			ga, err := f.h.guestCredentials(context.Background(), tt.model)
			assert.Equal(t, tt.wantCalls, cds.SecretReads())
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), "s3cr3t-value")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "root", ga.Auth.Username)
			assert.Equal(t, tt.want, ga.Auth.Password)
		})
	}

	// Without an API client a reference cannot be resolved: a clear error.
	f := newSpFixture(t, spConfig())
	_, err := f.h.guestCredentials(context.Background(), withPassword("{{.secrets.vsphere_password}}"))
	require.EqualError(t, err, `model "shared.infra/mymodel": its password references a secret and the hatchery has no CDS API client`)
}
