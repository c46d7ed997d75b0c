package spawn

import (
	"encoding/base64"
	"maps"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeWorkerConfig decodes arbitrary CDS_CONFIG values: never a
// panic, and whatever decodes encodes back to a value that decodes the same.
func FuzzDecodeWorkerConfig(f *testing.F) {
	full := WorkerConfig{
		Name: "ours-w-1", Basedir: "/tmp", HatcheryName: "ours", APIEndpoint: "https://cds.example/api",
		APIEndpointInsecure: true, APIToken: "eyJ.secret", CDNEndpoint: "cdn:8090", Model: "shared.infra/debian",
		BookedJobID: 42, RunJobID: "3f1c", Region: "default", InjectEnvVars: map[string]string{"A": "b", "": "="},
		Log: WorkerLogConfig{GraylogProtocol: "tcp", GraylogHost: "gl", GraylogPort: "12201", Level: "debug"},
	}
	for _, s := range []string{
		full.EncodeBase64(),
		WorkerConfig{}.EncodeBase64(),
		"", "=", "e30=", "e30", "bnVsbA==", // {}, {} unpadded, null
		base64.StdEncoding.EncodeToString([]byte(`{"booked_job_id":1e99}`)),
		base64.StdEncoding.EncodeToString([]byte(`{"inject_env_vars":{"a":1}}`)),
		base64.URLEncoding.EncodeToString([]byte(`{"name":"??>>"}`)),
		"not base64 at all",
	} {
		f.Add(s, "")
	}
	f.Add("", "ours-w-2")
	f.Add("", "\xff")
	f.Fuzz(func(t *testing.T, s, name string) {
		c, err := DecodeWorkerConfig(s)
		if err == nil {
			// A decoded config survives encode -> decode unchanged.
			d, err := DecodeWorkerConfig(c.EncodeBase64())
			if err != nil {
				t.Fatalf("decode own encoding: %v", err)
			}
			if !equalWorkerConfig(c, d) {
				t.Fatalf("round trip changed the config:\n%+v\n%+v", c, d)
			}
		}

		// A config the hatchery builds (any text, as UTF-8 JSON carries it)
		// round trips through CDS_CONFIG.
		if !utf8.ValidString(name) {
			return
		}
		built := full
		built.Name, built.RunJobID, built.InjectEnvVars = name, name, map[string]string{name: name}
		enc := built.EncodeBase64()
		if _, err := base64.StdEncoding.DecodeString(enc); err != nil {
			t.Fatalf("EncodeBase64 is not standard base64: %v", err)
		}
		got, err := DecodeWorkerConfig(enc)
		if err != nil || !equalWorkerConfig(built, got) {
			t.Fatalf("round trip of %+v: %+v, %v", built, got, err)
		}
	})
}

// equalWorkerConfig compares configs; an empty env map equals none (the
// encoding omits both).
func equalWorkerConfig(a, b WorkerConfig) bool {
	if !maps.Equal(a.InjectEnvVars, b.InjectEnvVars) {
		return false
	}
	a.InjectEnvVars, b.InjectEnvVars = nil, nil
	return reflect.DeepEqual(a, b)
}
