package inventory

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
)

// fuzzOurs is the hatchery name the ownership fuzzers test against.
const fuzzOurs = "ours"

// annotationSeeds are Notes values seen or plausible in the field: our
// record, another hatchery's, an operator's free text, corrupt JSON, and
// JSON that is not an object.
var annotationSeeds = []string{
	"",
	"   ",
	`{"hatchery_name":"ours","worker_name":"w-1","created":"2026-11-22T11:22:19.147007Z"}`,
	`{"hatchery_name":"ours","worker_name":"w-1","provisioning":true,"flavor":"large","worker_started":"2026-11-22T11:30:00+02:00"}`,
	`{"hatchery_name":"theirs","worker_name":"w-2"}`,
	`{"hatchery_name":""}`,
	`{"worker_name":"w-3"}`,
	`{"hatchery_name":"ours"`,
	`{"hatchery_name":42}`,
	`{"hatchery_name":"ours","created":"not a time"}`,
	`{"hatchery_name":"ours","hatchery_name":""}`,
	`{"HATCHERY_NAME":"ours"}`,
	`{"hatchery_name":"ours"} trailing`,
	`["ours"]`,
	`"ours"`,
	`null`,
	"Build VM for team X — do not delete",
	"\xff\xfe{",
	"{\"hatchery_name\":\"our\xffs\"}",
}

// annotationEqual compares two records field by field, times by instant.
func annotationEqual(a, b *Annotation) bool {
	if a == nil || b == nil {
		return a == b
	}
	if !a.Created.Equal(b.Created) {
		return false
	}
	if (a.WorkerStarted == nil) != (b.WorkerStarted == nil) ||
		a.WorkerStarted != nil && !a.WorkerStarted.Equal(*b.WorkerStarted) {
		return false
	}
	x, y := *a, *b
	x.Created, y.Created = time.Time{}, time.Time{}
	x.WorkerStarted, y.WorkerStarted = nil, nil
	return x == y
}

// checkParsed asserts the properties every ParseAnnotation answer has.
func checkParsed(t *testing.T, s string, a *Annotation, err error) {
	t.Helper()
	trimmed := strings.TrimSpace(s)
	if len(trimmed) > maxAnnotationBytes && err == nil {
		t.Fatalf("accepted a record of %d bytes, over the %d bound", len(trimmed), maxAnnotationBytes)
	}
	if err != nil {
		if a != nil {
			t.Fatalf("error %v together with a record %+v", err, a)
		}
		return
	}
	if a == nil {
		t.Fatal("no error and no record")
	}
	if a.HatcheryName == "" {
		t.Fatalf("accepted %q without a hatchery name", s)
	}
	var obj map[string]json.RawMessage
	if jerr := json.Unmarshal([]byte(trimmed), &obj); jerr != nil || obj == nil {
		t.Fatalf("accepted %q, which is not a JSON object (%v)", s, jerr)
	}
	// Marshal -> Parse is the identity on any accepted record.
	m := a.Marshal()
	if m == "" {
		t.Fatalf("Marshal of accepted record %+v is empty", a)
	}
	b, berr := ParseAnnotation(m)
	if berr != nil {
		t.Fatalf("re-parse of %q: %v", m, berr)
	}
	if !annotationEqual(a, b) {
		t.Fatalf("round trip changed the record:\n%+v\n%+v", a, b)
	}
	if b.Marshal() != m {
		t.Fatalf("Marshal is not a fixed point: %q then %q", m, b.Marshal())
	}
}

func FuzzParseAnnotation(f *testing.F) {
	for _, s := range annotationSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAnnotation(s)
		checkParsed(t, s, a, err)
	})
}

// TestParseAnnotationBounded feeds records just over the bound, including
// one that is valid JSON and names us: none is parsed.
func TestParseAnnotationBounded(t *testing.T) {
	t.Parallel()
	pad := strings.Repeat("x", maxAnnotationBytes)
	for name, s := range map[string]string{
		"valid record with a huge field": `{"hatchery_name":"ours","job_id":"` + pad + `"}`,
		"huge garbage":                   "{" + pad,
		"whitespace padded huge record":  "  \n" + `{"hatchery_name":"ours","flavor":"` + pad + `"}` + "\t ",
	} {
		if _, err := ParseAnnotation(s); err == nil {
			t.Errorf("%s: accepted %d bytes", name, len(s))
		}
	}
	// Whitespace around a normal record does not count against the bound.
	ws := strings.Repeat(" ", maxAnnotationBytes)
	if a, err := ParseAnnotation(ws + `{"hatchery_name":"ours"}` + ws); err != nil || a.HatcheryName != fuzzOurs {
		t.Errorf("padded record: %v, %+v", err, a)
	}
}

// Mirror layouts of FuzzAnnotationFromVM, by the fuzzed mode byte.
const (
	mirrorNone      = iota // no ExtraConfig at all
	mirrorString           // the mirror key holding the fuzzed string
	mirrorNotString        // the mirror key holding an int
	mirrorOtherKey         // the fuzzed string under a guestinfo key
	mirrorAfterJunk        // a typed-nil entry and a corrupt mirror, then the fuzzed mirror
	mirrorModes
)

func fuzzExtraConfig(mode uint8, mirror string) []types.BaseOptionValue {
	switch mode % mirrorModes {
	case mirrorString:
		return []types.BaseOptionValue{&types.OptionValue{Key: "guestinfo.x", Value: "y"},
			&types.OptionValue{Key: AnnotationMirrorKey, Value: mirror}}
	case mirrorNotString:
		return []types.BaseOptionValue{&types.OptionValue{Key: AnnotationMirrorKey, Value: int32(len(mirror))}}
	case mirrorOtherKey:
		return []types.BaseOptionValue{&types.OptionValue{Key: "guestinfo." + AnnotationMirrorKey, Value: mirror}}
	case mirrorAfterJunk:
		return []types.BaseOptionValue{(*types.OptionValue)(nil),
			&types.OptionValue{Key: AnnotationMirrorKey, Value: "{corrupt"},
			&types.OptionValue{Key: AnnotationMirrorKey, Value: mirror}}
	}
	return nil
}

func FuzzAnnotationFromVM(f *testing.F) {
	ours := `{"hatchery_name":"ours","worker_name":"w-1"}`
	theirs := `{"hatchery_name":"theirs","worker_name":"w-2"}`
	for mode := uint8(0); mode < mirrorModes; mode++ {
		f.Add(ours, ours, mode)
		f.Add("operator edited this", ours, mode)
		f.Add("", ours, mode)
		f.Add(theirs, ours, mode)
		f.Add(ours, theirs, mode)
		f.Add(`{"hatchery_name":"ours"`, `{"hatchery_name":""}`, mode)
		f.Add(`{corrupt`, `{corrupt`, mode)
	}
	f.Fuzz(func(t *testing.T, notes, mirror string, mode uint8) {
		extra := fuzzExtraConfig(mode, mirror)
		got, err := AnnotationFromVM(notes, vim.OptionsOf(extra))
		if (err == nil) == (got == nil) {
			t.Fatalf("record %+v with error %v", got, err)
		}

		// The expected record: Notes when it parses, else the mirror
		// (only a string under the mirror key), else none.
		want, nerr := ParseAnnotation(notes)
		checkParsed(t, notes, want, nerr)
		if nerr != nil {
			want = nil
			m := mode % mirrorModes
			if m == mirrorString || m == mirrorAfterJunk {
				mm, merr := ParseAnnotation(mirror)
				checkParsed(t, mirror, mm, merr)
				want = mm
			}
		}
		if !annotationEqual(got, want) {
			t.Fatalf("AnnotationFromVM(%q, mode %d, %q) = %+v, want %+v", notes, mode%mirrorModes, mirror, got, want)
		}

		// Ownership through the VM view: ours only when the chosen record
		// names us; a foreign record in Notes wins over our mirror, a
		// corrupt record never makes a VM ours.
		vm := VMFromInfo(vim.VMInfoOf(mo.VirtualMachine{Config: &types.VirtualMachineConfigInfo{Annotation: notes, ExtraConfig: extra}}))
		wantOurs := want != nil && want.HatcheryName == fuzzOurs
		if vm.OwnedBy(fuzzOurs) != wantOurs {
			t.Fatalf("OwnedBy(ours) = %v for notes %q, mirror %q (mode %d)", !wantOurs, notes, mirror, mode%mirrorModes)
		}
		if vm.OwnedBy("") {
			t.Fatal("a VM is owned by the empty hatchery name")
		}
		if !annotationEqual(vm.Annotation, want) {
			t.Fatalf("VM view record %+v, want %+v", vm.Annotation, want)
		}
	})
}

// FuzzAnnotationRoundTrip builds records from fuzzed fields: Marshal ->
// Parse is the identity, and the Record (vim.ApplyRecord) writes Notes and exactly one mirror
// that AnnotationFromVM reads back, even when Notes is lost afterwards.
func FuzzAnnotationRoundTrip(f *testing.F) {
	f.Add("ours", "ours-w-1", "shared.infra/debian", "tpl", "2026-11-22", "123", "10.0.0.5", "large", int64(1795346541), int64(147007000), true, false, int64(-1))
	f.Add("h", "", "", "", "", "", "", "", int64(0), int64(0), false, true, int64(1795346600))
	f.Add("é\u2028<&>\"\\", "\x00", "", "", "", "", "", "", int64(-62135596800), int64(999999999), true, true, int64(253402300799))
	f.Fuzz(func(t *testing.T, hatchery, worker, modelPath, vmwarePath, lastMod, jobID, ip, flavor string,
		createdSec, createdNsec int64, provisioning, model bool, startedSec int64) {
		for _, s := range []string{hatchery, worker, modelPath, vmwarePath, lastMod, jobID, ip, flavor} {
			if !utf8.ValidString(s) {
				return // JSON carries text: invalid UTF-8 is not a record we write
			}
		}
		if hatchery == "" {
			return
		}
		// Times the hatchery writes: UTC, years 1..9999 (JSON's RFC 3339 range).
		const minSec, maxSec = -62135596800, 253402300799
		a := Annotation{
			HatcheryName: hatchery, WorkerName: worker, Provisioning: provisioning, Model: model,
			WorkerModelPath: modelPath, VMwareModelPath: vmwarePath, WorkerModelLastModified: lastMod,
			Created: time.Unix(min(max(createdSec, minSec), maxSec), createdNsec%1e9).UTC(),
			JobID:   jobID, IPAddress: ip, Flavor: flavor,
		}
		if startedSec >= 0 {
			ws := time.Unix(min(startedSec, maxSec), 0).UTC()
			a.WorkerStarted = &ws
		}
		m := a.Marshal()
		if m == "" {
			t.Fatalf("Marshal of %+v is empty", a)
		}
		b, err := ParseAnnotation(m)
		if err != nil {
			t.Fatalf("parse own record %q: %v", m, err)
		}
		if !annotationEqual(&a, b) {
			t.Fatalf("round trip:\n%+v\n%+v", a, *b)
		}

		spec := &types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
			&types.OptionValue{Key: AnnotationMirrorKey, Value: "stale"},
		}}
		vim.ApplyRecord(spec, a.Record())
		vim.ApplyRecord(spec, a.Record()) // idempotent: still one mirror
		mirrors := 0
		for _, o := range spec.ExtraConfig {
			if ov := o.GetOptionValue(); ov.Key == AnnotationMirrorKey {
				mirrors++
				if ov.Value != m {
					t.Fatalf("mirror %v, want %q", ov.Value, m)
				}
			}
		}
		if mirrors != 1 || spec.Annotation != m {
			t.Fatalf("ApplyRecord wrote %d mirrors, notes %q", mirrors, spec.Annotation)
		}
		for _, notes := range []string{spec.Annotation, "", "edited by an operator"} {
			got, err := AnnotationFromVM(notes, vim.OptionsOf(spec.ExtraConfig))
			if err != nil || !annotationEqual(&a, got) {
				t.Fatalf("read back with notes %q: %+v, %v", notes, got, err)
			}
		}
	})
}

func TestAnnotationIgnoresNilExtraConfigEntries(t *testing.T) {
	t.Parallel()
	mirror := Annotation{HatcheryName: "ours", WorkerName: "w"}.Marshal()
	extra := []types.BaseOptionValue{nil, &types.OptionValue{Key: AnnotationMirrorKey, Value: mirror}}
	a, err := AnnotationFromVM("", vim.OptionsOf(extra))
	if err != nil || a.HatcheryName != "ours" {
		t.Fatalf("mirror after a nil entry: got %v, %v", a, err)
	}
	spec := types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{nil}}
	vim.ApplyRecord(&spec, Annotation{HatcheryName: "ours"}.Record())
	if len(spec.ExtraConfig) != 2 || spec.Annotation == "" {
		t.Fatalf("ApplyRecord over a nil entry: %+v", spec)
	}
}
