package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// configKeyTree describes the TOML keys Config accepts, read from its
// toml struct tags: for every table path (array elements written "[]",
// e.g. "hatchery.vsphere.networks[]"), the child key names.
type configKeyTree map[string][]string

// flavorsKey is the table both flavor forms live under.
const flavorsKey = "flavors"

// configKeys walks Config's toml tags, recursively through nested
// tables and arrays of tables. Flavors (tagged toml:"-" because the loader
// reads its two forms itself) is described as an array of Flavor.
func configKeys() configKeyTree {
	tree := configKeyTree{"hatchery": {"vsphere"}}
	walkKeys(tree, KeyPrefix, reflect.TypeFor[Config]())
	return tree
}

// KeyPaths returns every leaf key Config accepts, with its full
// TOML path, sorted; elements of arrays of tables are written "[]"
// ("hatchery.vsphere.networks[].iprange"). Flavors are listed in their array
// form. It is what docs/configuration.md and configs/hatchery.toml are
// checked against.
func KeyPaths() []string {
	tree := configKeys()
	var out []string
	for parent, children := range tree {
		for _, c := range children {
			p := parent + "." + c
			if _, table := tree[p]; table {
				continue
			}
			if _, array := tree[p+"[]"]; array {
				continue
			}
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func walkKeys(tree configKeyTree, path string, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := tomlName(f)
		ft := f.Type
		if f.Name == "Flavors" && t == reflect.TypeFor[Config]() {
			name = flavorsKey
		}
		if name == "" {
			continue
		}
		tree[path] = append(tree[path], name)
		child := path + "." + name
		switch {
		case ft.Kind() == reflect.Struct:
			walkKeys(tree, child, ft)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			walkKeys(tree, child+"[]", ft.Elem())
		}
	}
}

// tomlName is the key of a struct field, "" when it has none.
func tomlName(f reflect.StructField) string {
	tag := f.Tag.Get("toml")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

// children returns the keys accepted under a table path written without
// array markers, as MetaData.Undecoded reports it
// ("hatchery.vsphere.networks"): the path is matched against the tree with
// and without "[]" after each segment.
func (tree configKeyTree) children(path string) []string {
	for k, v := range tree {
		if strings.ReplaceAll(k, "[]", "") == path {
			return v
		}
	}
	return nil
}

// suggest returns the accepted key under parent closest to the mistyped
// key, or "" when none is close enough to be a plausible typo.
func (tree configKeyTree) suggest(parent, key string) string {
	best, bestD := "", -1
	for _, c := range tree.children(parent) {
		d := editDistance(strings.ToLower(key), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(key)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// caseDuplicates reports every key written a second time in another letter
// case within one table ("maxCpus" and "MaxCpus"): the decoder matches keys
// regardless of case, so the later one would silently win. Each element of
// an array of tables is its own table: the same key in two elements is no
// duplicate.
func caseDuplicates(md toml.MetaData) Errors {
	var out Errors
	seen := map[string]string{} // lower-cased path -> path as first written
	for _, k := range md.Keys() {
		path := k.String()
		lower := strings.ToLower(path)
		if md.Type(k...) == "ArrayHash" {
			// A new element: forget the keys of the previous one.
			for p := range seen {
				if strings.HasPrefix(p, lower+".") {
					delete(seen, p)
				}
			}
		}
		first, ok := seen[lower]
		if !ok {
			seen[lower] = path
			continue
		}
		if first != path {
			out = append(out, FieldError{Key: path, Problem: fmt.Sprintf("is %s written again in another letter case (keys match regardless of case, so one would silently override the other): keep one", first)})
		}
	}
	return out
}
