package vsphere

import (
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/vmware/govmomi/vim25/types"
)

// guestAccess is how the hatchery signs in to a worker's guest OS and what
// it runs there before the worker. It holds a secret: never log it.
type guestAccess struct {
	auth           *types.NamePasswordAuthentication
	preStartScript string
	// source says where the credentials came from, for logs ("config" or
	// "model"); never the credentials themselves.
	source string
}

// credentialKey is what a guestCredentials/models entry is matched on: the
// template name for a V2 model (ModelVMWare), the model path for V1
// (ModelPath).
func credentialMatches(c GuestCredential, model sdk.WorkerStarterWorkerModel) bool {
	if model.IsV1() {
		return c.ModelPath != "" && c.ModelPath == model.GetName()
	}
	return c.ModelVMWare != "" && c.ModelVMWare == model.GetVSphereImage()
}

// guestCredentials resolves the guest account of a model (001 §6.2.3):
// the first guestCredentials entry, then the first models entry (alias),
// matched on the model; else the model's own username/password. The
// preStartScript of the matching entry is kept even when the account comes
// from the model. No account is an error that names the model, never the
// secret.
func (h *HatcheryVSphere) guestCredentials(model sdk.WorkerStarterWorkerModel) (guestAccess, error) {
	var ga guestAccess
	var matched *GuestCredential
	for _, list := range [][]GuestCredential{h.cfg.GuestCredentials, h.cfg.Models} {
		for i := range list {
			if credentialMatches(list[i], model) {
				matched = &list[i]
				break
			}
		}
		if matched != nil {
			break
		}
	}
	if matched != nil {
		ga.preStartScript = matched.PreStartScript
		if matched.Username != "" {
			ga.auth = &types.NamePasswordAuthentication{Username: matched.Username, Password: matched.Password}
			ga.source = "config"
			return ga, nil
		}
	}
	if u := model.GetVSphereUsername(); u != "" {
		ga.auth = &types.NamePasswordAuthentication{Username: u, Password: model.GetVSpherePassword()}
		ga.source = "model"
		return ga, nil
	}
	return ga, fmt.Errorf("no guest credentials for model %q (image %q): set guestCredentials in the hatchery config or username/password in the model", model.GetName(), model.GetVSphereImage())
}
