package hatchery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

// maxModelSpawnErrors is the model spawn error count (nb_spawn_err) at
// which registration attempts stop, as in CDS's own hatcheries.
const maxModelSpawnErrors = 5

// registerLoop registers the V1 models that need it every
// Intervals.Register.
func (f *Framework) registerLoop(ctx context.Context) {
	hm := f.h.(InterfaceWithModels)
	runLoop(ctx, f.iv.Register, nil, func(ctx context.Context) { f.registerPass(ctx, hm) })
}

// registerPass books and spawns a RegisterOnly worker for each model that
// needs registration, within maxConcurrentRegistering. Spawns run in
// goroutines joined by Run.
func (f *Framework) registerPass(ctx context.Context, hm InterfaceWithModels) {
	if f.drain.on.Load() {
		return // draining: no registration starts (drain.go)
	}
	models, err := f.modelsV1(ctx, true)
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("registration pass: list models failed", logkey.Err, err)
		}
		return
	}
	for i := range models {
		if ctx.Err() != nil {
			return
		}
		m := models[i]
		if m.Type != f.h.ModelType() || m.Disabled {
			continue
		}
		path := m.Path()
		key := "register:" + path
		if m.NbSpawnErr >= maxModelSpawnErrors {
			// As CDS's own hatcheries do: a model that failed this often
			// needs a human; a successful registration clears the count.
			reason := fmt.Sprintf("spawn errors: the model has %d, registration stops at %d", m.NbSpawnErr, maxModelSpawnErrors)
			lvl := slog.LevelWarn
			if !f.skips.First(key, reason) {
				lvl = slog.LevelDebug
			}
			f.log.Log(ctx, lvl, "registration skipped", logkey.Model, path, logkey.Detail, reason)
			continue
		}
		if f.refused.has(path, m.UserLastModified) {
			// Its commands did not render: the same version would fail
			// the same way, and was reported on the model once already.
			reason := "model commands do not render (reported on the model); registration waits for the model to be modified"
			lvl := slog.LevelWarn
			if !f.skips.First(key, reason) {
				lvl = slog.LevelDebug
			}
			f.log.Log(ctx, lvl, "registration skipped", logkey.Model, path, logkey.Detail, reason)
			continue
		}
		f.skips.Forget(key)
		if !hm.NeedRegistration(ctx, &m) {
			continue
		}
		f.inflightMu.Lock()
		_, busy := f.inflight[key]
		f.inflightMu.Unlock()
		if busy {
			continue
		}
		model := sdk.WorkerStarterWorkerModel{ModelV1: &m}
		if r := f.h.CanSpawn(ctx, model, "", nil); r != nil {
			f.log.Info("registration skipped", logkey.Model, path, logkey.Reason, r.Reason, logkey.Detail, r.Detail)
			continue
		}
		name := WorkerName(workerpool.RegisterPrefix, m.Name)
		s, refused := f.reserve(name, true)
		if s == nil {
			f.log.Info("registration skipped", logkey.Model, path, logkey.Reason, refused.Reason, logkey.Detail, refused.Detail)
			return
		}
		group := ""
		if m.Group != nil {
			group = m.Group.Name
		}
		if err := f.client.WorkerModelBook(ctx, group, m.Name); err != nil {
			s.Release()
			f.log.Info("registration skipped", logkey.Model, path, logkey.Detail, "book model: "+err.Error())
			continue
		}
		token, err := f.workerToken(name, model, 0, "", true)
		if err != nil {
			s.Release()
			f.log.Error("registration skipped", logkey.Model, path, logkey.Err, err)
			continue
		}
		args := spawn.Arguments{
			WorkerName:   name,
			Model:        model,
			RegisterOnly: true,
			HatcheryName: f.cfg.Name,
			WorkerConfig: buildWorkerConfig(f.cfg, f.workerCDN(), f.workerLg, workerConfigInput{Name: name, Model: path, Token: token}),
		}
		f.inflightMu.Lock()
		if f.drain.on.Load() { // a drain started during the pass
			f.inflightMu.Unlock()
			s.Release()
			return
		}
		f.inflight[key] = struct{}{}
		f.inflightMu.Unlock()
		f.spawns.Add(1)
		go func() {
			defer f.spawns.Done()
			defer f.done(key)
			defer s.Release()
			f.register(ctx, group, args, s)
		}()
	}
}

// register spawns one registration worker and reports a failure on the
// model, once per attempt: the hatchery itself does not report it. It
// ends the slot's reservation when SpawnWorker returns.
func (f *Framework) register(ctx context.Context, group string, args spawn.Arguments, s *workerpool.Slot) {
	path := args.Model.GetName()
	ev := SpawnEvent{Model: path, RegisterOnly: true}
	start := f.now()
	f.log.Info("registering model", logkey.Model, path, logkey.VM, args.WorkerName)
	f.obs.SpawnStarted(ev)
	err := f.h.SpawnWorker(ctx, args)
	d := f.now().Sub(start)
	if err == nil {
		s.Spawned()
		f.obs.SpawnSucceeded(ev, d)
		f.log.Info("registration worker spawned", logkey.Model, path, logkey.VM, args.WorkerName, "duration", d.Round(time.Millisecond))
		return
	}
	s.Release()
	ev.Err = err
	f.obs.SpawnFailed(ev, d)
	f.log.Warn("registration spawn failed", logkey.Model, path, logkey.VM, args.WorkerName, logkey.Err, err)
	dctx, cancel := f.detached(ctx)
	defer cancel()
	if rerr := f.client.WorkerModelSpawnError(dctx, group, args.Model.ModelV1.Name, sdk.SpawnErrorForm{Error: err.Error()}); rerr != nil {
		f.log.Warn("report model spawn error failed", logkey.Model, path, logkey.Err, rerr)
	}
	var mce *spawn.ModelCommandError
	if errors.As(err, &mce) {
		f.refused.add(path, args.Model.ModelV1.UserLastModified)
	}
}

// refusedModels are the versions of V1 models whose commands did not
// render at registration (a ModelCommandError): registering them again
// would fail the same way, so the register loop skips them until the
// model is modified. Safe for concurrent use; the zero value is ready.
type refusedModels struct {
	mu sync.Mutex
	m  map[string]time.Time // model path -> its user_last_modified then
}

// add records the version of the model path.
func (r *refusedModels) add(path string, version time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]time.Time{}
	}
	r.m[path] = version
}

// has tells whether this version of the model path was refused.
func (r *refusedModels) has(path string, version time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[path]
	return ok && v.Equal(version)
}
