module github.com/cds-contrib/hatchery-vsphere

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/golang/mock v1.6.0
	github.com/stretchr/testify v1.12.1
	github.com/vmware/govmomi v0.56.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/mod v0.38.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/tools v0.48.0 // indirect
)
