package demo

import (
	"fmt"
	"io"
	"log"
	"sync"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// stdLog silences the standard library logger while demo simulators run:
// govmomi's simulator reports every request for a VM it no longer holds
// ("managed object not found: VirtualMachine:vm-71") with log.Print, noise
// for an operator watching the demo. The logger is process-wide, so
// concurrent demos (tests) share one silencing: the first saves the output,
// the last restores it. Production code paths never touch it.
var stdLog struct {
	mu    sync.Mutex
	users int
	saved io.Writer
}

// silenceStdLog sends the standard logger to io.Discard until the
// returned function is called.
func silenceStdLog() (restore func()) {
	stdLog.mu.Lock()
	defer stdLog.mu.Unlock()
	if stdLog.users == 0 {
		stdLog.saved = log.Writer()
		log.SetOutput(io.Discard)
	}
	stdLog.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			stdLog.mu.Lock()
			defer stdLog.mu.Unlock()
			stdLog.users--
			if stdLog.users == 0 {
				log.SetOutput(stdLog.saved)
				stdLog.saved = nil
			}
		})
	}
}

// startSimulator starts the in-process vCenter simulator with the standard
// logger silenced; closeFn stops it and restores the logger.
func startSimulator(o vcsimtest.Options) (env *vcsimtest.Env, closeFn func(), err error) {
	restore := silenceStdLog()
	env, err = vcsimtest.New(o)
	if err != nil {
		restore()
		return nil, nil, fmt.Errorf("start vcenter simulator: %w", err)
	}
	return env, func() {
		env.Close()
		restore()
	}, nil
}
