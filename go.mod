module github.com/cds-contrib/hatchery-vsphere

go 1.26.8

require (
	github.com/golang/mock v1.6.0
	github.com/vmware/govmomi v0.56.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/mod v0.38.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/tools v0.48.0 // indirect
)
