package vcsimtest

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The fake guest's files: vCenter's guest file manager hands out, for a
// file in a guest (InitiateFileTransferFromGuest), a URL of the form
// https://*/guestFile?id=N&token=T from which the file is read with an
// HTTP GET ("*" stands for the host the client reached), and deletes a
// file in the guest (DeleteFileInGuest); both refuse, as the process
// manager does, a VM not powered on or not ready and wrong credentials,
// and a missing file is FileNotFound. The simulator's own manager needs
// Docker. The fake guest runs no shell: it understands one program, the
// write of a word to a file, in the forms `vcenter check` uses
// (internal/vcheck, guest.go):
//
//	/bin/sh -c "printf %s WORD > PATH"
//	powershell … -Command "Set-Content -NoNewline -Path 'PATH' -Value 'WORD'"

// guestFilePath is the simulator's path of the fake guest's transfers
// (vCenter's form; the simulator's own handler is "/guestFile/").
const guestFilePath = "/guestFile"

var (
	shWrite = regexp.MustCompile(`^-c "printf %s ([A-Za-z0-9._-]+) > (/[A-Za-z0-9./_-]+)"$`)
	psWrite = regexp.MustCompile(`-Command "Set-Content -NoNewline -Path '([^']+)' -Value '([A-Za-z0-9._-]+)'"$`)
)

// guestFiles are the files the fake guest's programs wrote, per VM, and
// the transfers handed out.
type guestFiles struct {
	mu        sync.Mutex
	files     map[string]map[string]string // VM name -> path -> content
	transfers map[string]string            // transfer id -> content
	next      int
	// edit, when set, is what a program writes instead of its word
	// (FakeGuest.SetWrites).
	edit func(call GuestCall, word string) string
}

// SetWrites makes the fake's programs write, instead of their word, what
// edit returns for their call and word (nil: the word): a guest whose
// programs misbehave.
func (f *FakeGuest) SetWrites(edit func(call GuestCall, word string) string) {
	f.files.mu.Lock()
	f.files.edit = edit
	f.files.mu.Unlock()
}

// write keeps the file a started program writes, when it is one the fake
// understands.
func (g *guestFiles) write(call GuestCall) {
	var path, word string
	if m := shWrite.FindStringSubmatch(call.Arguments); m != nil && call.ProgramPath == "/bin/sh" {
		word, path = m[1], m[2]
	} else if m := psWrite.FindStringSubmatch(call.Arguments); m != nil && isPowerShell(call.ProgramPath) {
		path, word = m[1], m[2]
	} else {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.files == nil {
		g.files = map[string]map[string]string{}
	}
	if g.files[call.VM] == nil {
		g.files[call.VM] = map[string]string{}
	}
	if g.edit != nil {
		word = g.edit(call, word)
	}
	g.files[call.VM][path] = word
}

// File returns the content of the file path that a program wrote in the
// VM named vm, and whether there is one.
func (f *FakeGuest) File(vm, path string) (string, bool) {
	f.files.mu.Lock()
	defer f.files.mu.Unlock()
	s, ok := f.files.files[vm][path]
	return s, ok
}

// ServeHTTP serves a transfer's content (GET /guestFile?id=N).
func (g *guestFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	g.mu.Lock()
	s, ok := g.transfers[r.URL.Query().Get("id")]
	g.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	_, _ = w.Write([]byte(s))
}

// FakeGuestFiles replaces the simulator's guest file manager (whose
// transfers need Docker) with the fake guest's files.
type FakeGuestFiles struct {
	*simulator.GuestFileManager
	guest  *FakeGuest
	scheme string // the simulator's (https)
}

func installFakeGuestFiles(e *Env, g *FakeGuest) error {
	m := e.Model.Map()
	fms := m.AllReference("GuestFileManager")
	if len(fms) != 1 {
		return fmt.Errorf("install fake guest files: simulator has %d guest file managers, want 1", len(fms))
	}
	orig, ok := fms[0].(*simulator.GuestFileManager)
	if !ok {
		return fmt.Errorf("install fake guest files: guest file manager is a %T", fms[0])
	}
	m.Put(&FakeGuestFiles{GuestFileManager: orig, guest: g, scheme: e.URL.Scheme})
	e.Model.Service.Handle(guestFilePath, &g.files)
	return nil
}

// access refuses, as the process manager does, a VM not powered on or
// not ready and wrong credentials; it returns the VM's name.
func (m *FakeGuestFiles) access(ctx *simulator.Context, ref types.ManagedObjectReference, auth types.BaseGuestAuthentication) (string, types.BaseMethodFault) {
	vm, ok := ctx.Map.Get(ref).(*simulator.VirtualMachine)
	if !ok {
		return "", &types.ManagedObjectNotFound{Obj: ref}
	}
	var name string
	var state types.VirtualMachinePowerState
	ready := false
	ctx.WithLock(vm, func() {
		name = vm.Name
		state = vm.Runtime.PowerState
		ready = vm.Guest != nil && vm.Guest.GuestOperationsReady != nil && *vm.Guest.GuestOperationsReady
	})
	if fault := guestOpsFault(state, ready); fault != nil {
		return "", fault
	}
	a, _ := auth.(*types.NamePasswordAuthentication)
	m.guest.mu.Lock()
	defer m.guest.mu.Unlock()
	if a == nil || a.Username != m.guest.user || a.Password != m.guest.password {
		return "", new(types.InvalidGuestLogin)
	}
	return name, nil
}

// InitiateFileTransferFromGuest is the simulator method the fake
// overrides: a URL from which the file's content is read.
func (m *FakeGuestFiles) InitiateFileTransferFromGuest(ctx *simulator.Context, req *types.InitiateFileTransferFromGuest) soap.HasFault {
	body := new(methods.InitiateFileTransferFromGuestBody)
	name, fault := m.access(ctx, req.Vm, req.Auth)
	if fault != nil {
		body.Fault_ = simulator.Fault("", fault)
		return body
	}
	g := &m.guest.files
	g.mu.Lock()
	s, ok := g.files[name][req.GuestFilePath]
	id := ""
	if ok {
		g.next++
		id = strconv.Itoa(g.next)
		if g.transfers == nil {
			g.transfers = map[string]string{}
		}
		g.transfers[id] = s
	}
	g.mu.Unlock()
	if !ok {
		body.Fault_ = simulator.Fault("", &types.FileNotFound{FileFault: types.FileFault{File: req.GuestFilePath}})
		return body
	}
	u := url.URL{Scheme: m.scheme, Host: "*", Path: guestFilePath, RawQuery: url.Values{"id": {id}, "token": {ctx.Session.Key}}.Encode()}
	body.Res = &types.InitiateFileTransferFromGuestResponse{Returnval: types.FileTransferInformation{Size: int64(len(s)), Url: u.String()}}
	return body
}

// DeleteFileInGuest is the simulator method the fake overrides: it
// removes a file a program wrote.
func (m *FakeGuestFiles) DeleteFileInGuest(ctx *simulator.Context, req *types.DeleteFileInGuest) soap.HasFault {
	body := new(methods.DeleteFileInGuestBody)
	name, fault := m.access(ctx, req.Vm, req.Auth)
	if fault == nil {
		g := &m.guest.files
		g.mu.Lock()
		if _, ok := g.files[name][req.FilePath]; ok {
			delete(g.files[name], req.FilePath)
		} else {
			fault = &types.FileNotFound{FileFault: types.FileFault{File: req.FilePath}}
		}
		g.mu.Unlock()
	}
	if fault != nil {
		body.Fault_ = simulator.Fault("", fault)
		return body
	}
	body.Res = new(types.DeleteFileInGuestResponse)
	return body
}
