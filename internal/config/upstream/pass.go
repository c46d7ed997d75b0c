package upstream

import (
	"bytes"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// VSphere is what the upstream pass decodes of [hatchery.vsphere]: the
// keys only upstream has, all in its commonConfiguration.
type VSphere struct {
	CommonConfiguration Common `toml:"commonConfiguration"`
}

// Common is upstream's commonConfiguration less the keys this hatchery's
// own configuration decodes.
type Common struct {
	OSArch []string `toml:"osArch"`
	HTTP   struct {
		HeaderXForwardedFor string `toml:"headerXForwardedFor"`
	} `toml:"http"`
	LogOptions struct {
		SpawnOptions struct {
			ThresholdCritical int `toml:"thresholdCritical"`
			ThresholdWarning  int `toml:"thresholdWarning"`
		} `toml:"spawnOptions"`
	} `toml:"logOptions"`
	Provision struct {
		DisableV2QueuePolling bool `toml:"disableV2QueuePolling"`
		WorkerCDN             struct {
			URL string `toml:"url"`
			TCP struct {
				EnableTLS bool   `toml:"enableTLS"`
				URL       string `toml:"url"`
			} `toml:"tcp"`
		} `toml:"workerCdn"`
		WorkerLogsOptions struct {
			Level   string `toml:"level"`
			Graylog struct {
				Host       string `toml:"host"`
				Port       int    `toml:"port"`
				Protocol   string `toml:"protocol"`
				ExtraKey   string `toml:"extraKey"`
				ExtraValue string `toml:"extraValue"`
			} `toml:"graylog"`
			Syslog struct {
				Host     string `toml:"host"`
				Port     int    `toml:"port"`
				Protocol string `toml:"protocol"`
				ExtraTag string `toml:"extraTag"`
			} `toml:"syslog"`
		} `toml:"workerLogsOptions"`
	} `toml:"provision"`
}

// root is the document as the upstream pass decodes it.
type root struct {
	Hatchery struct {
		VSphere VSphere `toml:"vsphere"`
	} `toml:"hatchery"`
}

// Pass is the upstream reading of one document: the second decoding
// (beside internal/config's native one) and the report it writes.
type Pass struct {
	md  toml.MetaData // the second decoding's
	up  root
	rep *Report
}

// Decode decodes the keys only upstream has. An error is the TOML
// decoder's (a wrong type), for the caller to word: it may quote a value.
func Decode(data []byte) (*Pass, error) {
	p := &Pass{rep: &Report{}}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&p.up)
	if err != nil {
		return nil, err
	}
	p.md = md
	return p, nil
}

// Common is upstream's commonConfiguration keys as decoded.
func (p *Pass) Common() Common { return p.up.Hatchery.VSphere.CommonConfiguration }

// Report is the report the pass writes (never nil).
func (p *Pass) Report() *Report { return p.rep }

// otherSection returns the section an undecoded key belongs to when it is
// a table of another CDS service ([api], [hatchery.swarm]…), "" otherwise.
func otherSection(md toml.MetaData, k toml.Key) string {
	var sec toml.Key
	switch {
	case k[0] != "hatchery":
		sec = k[:1]
	case len(k) > 1 && k[1] != "vsphere":
		sec = k[:2]
	default:
		return ""
	}
	if t := md.Type(sec...); t != "Hash" && t != "ArrayHash" {
		return ""
	}
	return sec.String()
}

// FilterUnknown splits the keys the native decoding (md) left undecoded
// into those the upstream pass decoded, the sections of other services
// (named once each in the report) and the rest, returned: the unknown
// keys.
func (p *Pass) FilterUnknown(md toml.MetaData) []toml.Key {
	var out []toml.Key
	var sections []string
	undecodedHere := map[string]bool{}
	for _, k := range p.md.Undecoded() {
		undecodedHere[k.String()] = true
	}
	for _, k := range md.Undecoded() {
		if !undecodedHere[k.String()] {
			continue // an upstream key
		}
		if s := otherSection(md, k); s != "" {
			if !slices.Contains(sections, s) {
				sections = append(sections, s)
			}
			continue
		}
		out = append(out, k)
	}
	if len(sections) > 0 {
		p.rep.Engine = true
		names := make([]string, len(sections))
		for i, s := range sections {
			names[i] = "[" + s + "]"
		}
		p.rep.Notes = append(p.rep.Notes, Note{Key: strings.Join(names, ", "),
			What: "ignored: sections of other CDS services (this hatchery reads only [" + KeyPrefix + "])"})
	}
	return out
}

// ReportKeys writes, for each upstream key the native decoding saw
// (mdNative), what is done with it in the report (its Keys, and its Notes
// for the keys an operator should read about); defaulted holds the notes
// of the keys whose 0 took this hatchery's default, by path relative to
// KeyPrefix.
func (p *Pass) ReportKeys(mdNative toml.MetaData, defaulted map[string]string) {
	seen := map[string]bool{}
	for _, k := range mdNative.Keys() {
		if len(k) < 3 || k[0] != "hatchery" || k[1] != "vsphere" {
			continue
		}
		rel := strings.Join(k[2:], ".")
		u, ok := Lookup(rel)
		if !ok || seen[rel] {
			continue
		}
		seen[rel] = true
		what := string(u.Action)
		v := p.valueAt(u.Path)
		set := !v.IsZero() && (v.Kind() != reflect.Slice || v.Len() > 0)
		switch u.Action {
		case Mapped:
			what += " to " + KeyPrefix + "." + u.Target
		case ZeroDefault:
			what = string(Kept)
			if d, ok := defaulted[rel]; ok {
				what = d
			}
		}
		if u.Why != "" && u.Action != ZeroDefault {
			what += ": " + u.Why
		}
		if (u.Action == Mapped || u.Action == WorkerLog) && !set {
			what += " (not set: nothing to map)"
		}
		p.rep.Keys = append(p.rep.Keys, Note{Key: KeyPrefix + "." + u.Path, What: what})
		if u.Action == Unused || ((u.Action == Mapped || u.Action == Honoured) && set) {
			p.rep.Notes = append(p.rep.Notes, Note{Key: KeyPrefix + "." + u.Path, What: what})
		}
	}
}

// valueAt is the value of an upstream-only key (its path relative to
// KeyPrefix) as the upstream pass decoded it; the zero Value's IsZero
// cannot be called, so a key of the native decoding gives a zero int.
func (p *Pass) valueAt(path string) reflect.Value {
	v := reflect.ValueOf(p.up.Hatchery.VSphere)
	for _, seg := range strings.Split(path, ".") {
		found := false
		for i := 0; v.Kind() == reflect.Struct && i < v.NumField(); i++ {
			if n, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("toml"), ","); n == seg {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.ValueOf(0)
		}
	}
	return v
}
