package config

import (
	"fmt"
	"path"
	"strings"
)

// v2TemplateNamesKey is the key of V2TemplateNames (relative to KeyPrefix).
const v2TemplateNamesKey = "v2TemplateNames"

// V2TemplateAllowed tells whether a V2 model may name the template name
// (its spec.image): true when v2TemplateNames is empty (any template, as
// before the key existed) or when one of its patterns matches the whole
// name (path.Match; a malformed pattern, refused by Validate, matches
// nothing). docs/configuration.md, "Which templates V2 models may name".
func (c *Config) V2TemplateAllowed(name string) bool {
	if len(c.V2TemplateNames) == 0 {
		return true
	}
	for _, p := range c.V2TemplateNames {
		if ok, err := path.Match(strings.TrimSpace(p), name); err == nil && ok {
			return true
		}
	}
	return false
}

// V2TemplatePatterns is v2TemplateNames as a refusal or a log line shows
// it: the patterns quoted, comma-separated.
func (c *Config) V2TemplatePatterns() string {
	q := make([]string, len(c.V2TemplateNames))
	for i, p := range c.V2TemplateNames {
		q[i] = fmt.Sprintf("%q", strings.TrimSpace(p))
	}
	return strings.Join(q, ", ")
}

// validateV2Templates checks v2TemplateNames: every pattern non-empty and
// well-formed, and every V2 warm pool (workerProvisioning[].modelVMWare)
// on a template the patterns allow, since no V2 job could claim its VMs.
func (c *Config) validateV2Templates(es *Errors) {
	valid := true
	for i, p := range c.V2TemplateNames {
		key := fmt.Sprintf("%s[%d]", v2TemplateNamesKey, i)
		p = strings.TrimSpace(p)
		if p == "" {
			es.add(key, "empty pattern: it allows no template (remove it; an empty v2TemplateNames allows any)")
			valid = false
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			es.add(key, "%q is not a pattern (path.Match syntax: *, ?, [a-z], \\ escapes): %v", p, err)
			valid = false
		}
	}
	if !valid || len(c.V2TemplateNames) == 0 {
		return
	}
	for i, w := range c.WorkerProvisioning {
		if w.ModelVMWare == "" || c.V2TemplateAllowed(w.ModelVMWare) {
			continue
		}
		es.add(fmt.Sprintf("workerProvisioning[%d].modelVMWare", i), "%q matches no pattern of %s (%s): no V2 job could claim this pool's VMs", w.ModelVMWare, v2TemplateNamesKey, c.V2TemplatePatterns())
	}
}
