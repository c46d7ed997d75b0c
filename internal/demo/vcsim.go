package demo

import (
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// startSimulator starts the in-process vCenter simulator; closeFn stops it.
func startSimulator(o vcsimtest.Options) (env *vcsimtest.Env, closeFn func(), err error) {
	env, err = vcsimtest.New(o)
	if err != nil {
		return nil, nil, fmt.Errorf("start vcenter simulator: %w", err)
	}
	return env, env.Close, nil
}
