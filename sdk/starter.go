package sdk

// WorkerStarterWorkerModel is the model a worker is started with: exactly one
// of ModelV1 or ModelV2 is set. For V2 the framework decodes VSphereSpec and
// copies the job's runs-on flavor and memory, and fills the commands the
// hatchery runs in the guest (V2 models carry none).
type WorkerStarterWorkerModel struct {
	ModelV1 *Model
	ModelV2 *V2WorkerModel

	// VSphereSpec is ModelV2's spec decoded (V2 only).
	VSphereSpec V2WorkerModelVSphereSpec
	// JobFlavor is the V2 job's runs-on flavor, "" when the job asks none.
	JobFlavor string
	// JobMemory is the V2 job's runs-on memory, "" when the job asks none.
	JobMemory string
	// PreCmd, Cmd and PostCmd are the guest commands for V2 models.
	PreCmd  string
	Cmd     string
	PostCmd string
}

// IsV1 tells whether the model is a V1 model.
func (w WorkerStarterWorkerModel) IsV1() bool { return w.ModelV1 != nil }

// GetName returns the model's name: "group/name" for V1, the V2 name otherwise.
func (w WorkerStarterWorkerModel) GetName() string {
	switch {
	case w.ModelV1 != nil:
		return w.ModelV1.Path()
	case w.ModelV2 != nil:
		return w.ModelV2.Name
	}
	return ""
}

// GetType returns the model type ("vsphere" for this hatchery's models).
func (w WorkerStarterWorkerModel) GetType() string {
	switch {
	case w.ModelV1 != nil:
		return w.ModelV1.Type
	case w.ModelV2 != nil:
		return w.ModelV2.Type
	}
	return ""
}

// GetVSphereImage returns the name of the vSphere template to clone from.
func (w WorkerStarterWorkerModel) GetVSphereImage() string {
	if w.ModelV1 != nil {
		return w.ModelV1.ModelVirtualMachine.Image
	}
	return w.VSphereSpec.Image
}

// GetCmd returns the worker command.
func (w WorkerStarterWorkerModel) GetCmd() string {
	if w.ModelV1 != nil {
		return w.ModelV1.ModelVirtualMachine.Cmd
	}
	return w.Cmd
}

// GetPreCmd returns the command run before the worker.
func (w WorkerStarterWorkerModel) GetPreCmd() string {
	if w.ModelV1 != nil {
		return w.ModelV1.ModelVirtualMachine.PreCmd
	}
	return w.PreCmd
}

// GetPostCmd returns the command run after the worker exits.
func (w WorkerStarterWorkerModel) GetPostCmd() string {
	if w.ModelV1 != nil {
		return w.ModelV1.ModelVirtualMachine.PostCmd
	}
	return w.PostCmd
}

// GetVSphereUsername returns the guest username from the model.
func (w WorkerStarterWorkerModel) GetVSphereUsername() string {
	if w.ModelV1 != nil {
		return w.ModelV1.ModelVirtualMachine.User
	}
	return w.VSphereSpec.Username
}

// GetVSpherePassword returns the guest password from the model.
func (w WorkerStarterWorkerModel) GetVSpherePassword() string {
	if w.ModelV1 != nil {
		return w.ModelV1.ModelVirtualMachine.Password
	}
	return w.VSphereSpec.Password
}

// GetFlavor resolves the flavor name for a worker, most specific first
// (docs/design.md#flavor-resolution): the job's own request (V2 runs-on flavor, then a flavor
// requirement), then the model's flavor (V2 spec.flavor, V1
// ModelVirtualMachine.Flavor), then defaultFlavor. It returns "" when none
// applies: the template's resources are used as they are.
func (w WorkerStarterWorkerModel) GetFlavor(reqs RequirementList, defaultFlavor string) string {
	if w.JobFlavor != "" {
		return w.JobFlavor
	}
	for _, r := range reqs {
		if r.Type == FlavorRequirement && r.Value != "" {
			return r.Value
		}
	}
	switch {
	case w.ModelV1 != nil && w.ModelV1.ModelVirtualMachine.Flavor != "":
		return w.ModelV1.ModelVirtualMachine.Flavor
	case w.ModelV2 != nil && w.VSphereSpec.Flavor != "":
		return w.VSphereSpec.Flavor
	}
	return defaultFlavor
}
