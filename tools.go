//go:build tools

// Package tools pins build tools (mockgen) in go.mod.
package tools

import _ "github.com/golang/mock/mockgen"
