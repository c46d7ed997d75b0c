package config

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Reload: what a running hatchery may take from a configuration file read
// again (SIGHUP, `systemctl reload`, internal/daemon's reload), and what
// needs a restart. ChangedKeys lists what differs between two loaded
// configurations, by key; LiveKey tells whether a key may change live.

// liveKeys are the keys (without KeyPrefix) a reload applies to a running
// hatchery, each with its sub-keys: their readers take the configuration
// anew for each decision (internal/vsphere's conf, the warm pool's,
// the admission's, the collector's and the clone builder's; maxWorker is
// handed to the framework's worker pool). Every other key is read once at
// start (endpoints, names, secrets, placement, IP ranges, intervals of
// the loops, inventory mode, the framework's own settings) and a reload
// that changes it is refused as a whole.
var liveKeys = []string{
	"commonConfiguration.provision.maxWorker",
	"maxCpus",
	"maxMemoryMB",
	"countSmallerFlavorToKeep",
	"flavors",
	"defaultFlavor",
	"workerProvisioning",
	"workerProvisioningPoolSize",
	"models",
	"guestCredentials",
	"defaultWorkerModelsV2",
	"defaultBootstrap",
	"v2TemplateNames",
	"logLevel",
	"v2PreCmd",
	"v2Cmd",
	"v2PostCmd",
	"quarantineThreshold",
	"quarantineBackoff",
	"quarantineBackoffMax",
	"keepFailedWorkers",
	"keepFailedWorkersFor",
	"workerTTL",
	"workerRegistrationTTL",
	"finishedWorkerGracePeriod",
	"slowStartThreshold",
	"windowsGuestOpsTimeout",
	"windowsIPTimeout",
	"windowsEnvTimeout",
}

// LiveKeys returns the keys (with KeyPrefix) a reload applies live; a key
// under one of them (an element, a field of an element) is live too.
func LiveKeys() []string {
	out := make([]string, len(liveKeys))
	for i, k := range liveKeys {
		out[i] = KeyPrefix + "." + k
	}
	return out
}

// LiveKey tells whether key (as ChangedKeys names it) may change while the
// hatchery runs.
func LiveKey(key string) bool {
	k, ok := strings.CutPrefix(key, KeyPrefix+".")
	if !ok {
		return false
	}
	for _, l := range liveKeys {
		if k == l || strings.HasPrefix(k, l+".") || strings.HasPrefix(k, l+"[") {
			return true
		}
	}
	return false
}

// ChangedKeys lists, sorted, the keys whose values differ between old and
// new, named as the file names them (KeyPrefix + "." + path, list elements
// as key[i]); a list whose length changed is named once, as a whole. It
// compares secrets too but, like every key list, never holds a value.
func ChangedKeys(old, new *Config) []string {
	var out []string
	diffValue(KeyPrefix, reflect.ValueOf(*old), reflect.ValueOf(*new), &out)
	slices.Sort(out)
	return slices.Compact(out)
}

// diffValue appends to out the keys under path where a and b differ.
func diffValue(path string, a, b reflect.Value, out *[]string) {
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			diffValue(path+"."+keyName(f), a.Field(i), b.Field(i), out)
		}
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			*out = append(*out, path)
			return
		}
		for i := range a.Len() {
			diffValue(path+"["+strconv.Itoa(i)+"]", a.Index(i), b.Index(i), out)
		}
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				*out = append(*out, path)
			}
			return
		}
		diffValue(path, a.Elem(), b.Elem(), out)
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	}
}

// keyName is a field's key in the file: its toml name, else its json name
// (the flavors, decoded by hand), else its Go name.
func keyName(f reflect.StructField) string {
	for _, tag := range []string{"toml", "json"} {
		if n, _, _ := strings.Cut(f.Tag.Get(tag), ","); n != "" && n != "-" {
			return n
		}
	}
	return f.Name
}
