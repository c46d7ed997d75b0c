//go:build !demo

package main

// runDemo is nil in the production build: `demo` then says how to run it
// (with the build tag "demo", which links the simulators).
var runDemo DemoFunc
