package vsphere

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/vmware/govmomi/vim25/types"
)

// VM properties cloud-init's VMware datasource reads (docs/cloud-init.md).
const (
	GuestinfoMetadata         = "guestinfo.metadata"
	GuestinfoMetadataEncoding = "guestinfo.metadata.encoding"
	GuestinfoUserdata         = "guestinfo.userdata"
	GuestinfoUserdataEncoding = "guestinfo.userdata.encoding"
	// GuestinfoEncodingGzipBase64 is the encoding the hatchery writes:
	// gzip, then standard base64.
	GuestinfoEncodingGzipBase64 = "gzip+base64"
)

// Paths the userdata writes in the guest.
const (
	// CloudInitConfigPath holds the worker config (the CDS_CONFIG value,
	// with the worker token): readable by root only, removed by the start
	// script once read.
	CloudInitConfigPath = "/var/lib/cds-hatchery/worker-config"
	// CloudInitScriptPath is the worker script (preStartScript, PreCmd,
	// Cmd, PostCmd), run by cloud-init's runcmd in the background.
	CloudInitScriptPath = "/var/lib/cds-hatchery/worker-start.sh"
	// CloudInitLogPath receives the script's output.
	CloudInitLogPath = "/var/log/cds-worker.log"
)

// CloudInitMetadata is guestinfo.metadata: JSON, which cloud-init reads as
// YAML.
type CloudInitMetadata struct {
	InstanceID    string            `json:"instance-id"`
	LocalHostname string            `json:"local-hostname"`
	Network       *CloudInitNetwork `json:"network,omitempty"`
}

// CloudInitNetwork is a cloud-init network config, version 2 (netplan
// shape).
type CloudInitNetwork struct {
	Version   int                          `json:"version"`
	Ethernets map[string]CloudInitEthernet `json:"ethernets"`
}

// CloudInitEthernet is one interface of a version 2 network config.
type CloudInitEthernet struct {
	Match       map[string]string     `json:"match,omitempty"`
	DHCP4       bool                  `json:"dhcp4"`
	Addresses   []string              `json:"addresses,omitempty"`
	Routes      []CloudInitRoute      `json:"routes,omitempty"`
	Nameservers *CloudInitNameservers `json:"nameservers,omitempty"`
}

// CloudInitRoute is one route of an interface.
type CloudInitRoute struct {
	To  string `json:"to"`
	Via string `json:"via"`
}

// CloudInitNameservers are an interface's DNS servers.
type CloudInitNameservers struct {
	Addresses []string `json:"addresses"`
}

// CloudInitUserdata is the cloud-config the hatchery writes: the
// "#cloud-config" header line, then this as JSON (valid YAML).
type CloudInitUserdata struct {
	WriteFiles []CloudInitFile `json:"write_files"`
	Runcmd     [][]string      `json:"runcmd"`
}

// CloudInitFile is one write_files entry.
type CloudInitFile struct {
	Path        string `json:"path"`
	Permissions string `json:"permissions"`
	Content     string `json:"content"`
}

// cloudConfigHeader starts every cloud-config userdata.
const cloudConfigHeader = "#cloud-config\n"

// cloudInitBoot is what a cloud-init worker's VM is given: the worker
// script and the CDS_CONFIG value. It holds the worker token: never log it.
type cloudInitBoot struct {
	script    string
	cdsConfig string
}

// cloudInitNetwork is the network config of the static IP lease, or nil
// (cloud-init then brings the first interface up with DHCP).
func cloudInitNetwork(lease *ippool.Lease) (*CloudInitNetwork, error) {
	if lease == nil {
		return nil, nil
	}
	mask := net.ParseIP(lease.SubnetMask).To4()
	if mask == nil {
		return nil, fmt.Errorf("subnet mask %q of ip %s is not an ipv4 mask", lease.SubnetMask, lease.IP)
	}
	ones, bits := net.IPMask(mask).Size()
	if bits == 0 {
		return nil, fmt.Errorf("subnet mask %q of ip %s is not a contiguous mask", lease.SubnetMask, lease.IP)
	}
	eth := CloudInitEthernet{
		// The clone's first (only configured) NIC: the guest names it
		// ens192, eth0 or enp…; vCenter assigns its MAC after the spec.
		Match:     map[string]string{"name": "e*"},
		Addresses: []string{lease.IP + "/" + strconv.Itoa(ones)},
	}
	if lease.Gateway != "" {
		eth.Routes = []CloudInitRoute{{To: "0.0.0.0/0", Via: lease.Gateway}}
	}
	if len(lease.DNS) > 0 {
		eth.Nameservers = &CloudInitNameservers{Addresses: lease.DNS}
	}
	return &CloudInitNetwork{Version: 2, Ethernets: map[string]CloudInitEthernet{"nic0": eth}}, nil
}

// cloudInitUserdata renders the cloud-config of a worker: the config file,
// the script (which exports CDS_CONFIG from the file, removes the file and
// runs the model's commands, as the guest-operations launch does) and the
// runcmd starting it in the background.
func cloudInitUserdata(b cloudInitBoot) ([]byte, error) {
	start := "#!/bin/sh\n" +
		cdsConfigEnv + "=\"$(cat " + CloudInitConfigPath + ")\"\n" +
		"export " + cdsConfigEnv + "\n" +
		"rm -f " + CloudInitConfigPath + "\n" +
		b.script + "\n"
	ud := CloudInitUserdata{
		WriteFiles: []CloudInitFile{
			{Path: CloudInitConfigPath, Permissions: "0600", Content: b.cdsConfig},
			{Path: CloudInitScriptPath, Permissions: "0700", Content: start},
		},
		Runcmd: [][]string{{"/bin/sh", "-c", "nohup " + CloudInitScriptPath + " >" + CloudInitLogPath + " 2>&1 &"}},
	}
	body, err := json.Marshal(ud)
	if err != nil {
		return nil, fmt.Errorf("encode cloud-config: %w", err)
	}
	return append([]byte(cloudConfigHeader), body...), nil
}

// cloudInitOptions are the guestinfo options of a worker's VM: metadata
// (instance id, hostname, network of lease) and userdata, gzip+base64.
func cloudInitOptions(instanceID, hostname string, lease *ippool.Lease, b cloudInitBoot) ([]types.BaseOptionValue, error) {
	nw, err := cloudInitNetwork(lease)
	if err != nil {
		return nil, err
	}
	md, err := json.Marshal(CloudInitMetadata{InstanceID: instanceID, LocalHostname: hostname, Network: nw})
	if err != nil {
		return nil, fmt.Errorf("encode cloud-init metadata of %q: %w", hostname, err)
	}
	ud, err := cloudInitUserdata(b)
	if err != nil {
		return nil, fmt.Errorf("cloud-init userdata of %q: %w", hostname, err)
	}
	return []types.BaseOptionValue{
		&types.OptionValue{Key: GuestinfoMetadata, Value: gzipBase64(md)},
		&types.OptionValue{Key: GuestinfoMetadataEncoding, Value: GuestinfoEncodingGzipBase64},
		&types.OptionValue{Key: GuestinfoUserdata, Value: gzipBase64(ud)},
		&types.OptionValue{Key: GuestinfoUserdataEncoding, Value: GuestinfoEncodingGzipBase64},
	}, nil
}

// cloudInitScrub is the reconfigure that removes the userdata (and with
// it the worker token) from a VM: vSphere deletes an extraConfig key set
// to the empty string.
func cloudInitScrub() types.VirtualMachineConfigSpec {
	return types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
		&types.OptionValue{Key: GuestinfoUserdata, Value: ""},
		&types.OptionValue{Key: GuestinfoUserdataEncoding, Value: ""},
	}}
}

func gzipBase64(b []byte) string {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b) // writes to a bytes.Buffer do not fail
	_ = zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// DecodeGuestinfo decodes a guestinfo value written with encoding ("",
// "base64"/"b64" or "gzip+base64"/"gz+b64"), as cloud-init does.
func DecodeGuestinfo(value, encoding string) ([]byte, error) {
	switch encoding {
	case "":
		return []byte(value), nil
	case "base64", "b64":
		return base64.StdEncoding.DecodeString(value)
	case "gzip+base64", "gz+b64":
		raw, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			return nil, fmt.Errorf("decode guestinfo base64: %w", err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("decode guestinfo gzip: %w", err)
		}
		var out bytes.Buffer
		if _, err := out.ReadFrom(zr); err != nil {
			return nil, fmt.Errorf("decode guestinfo gzip: %w", err)
		}
		return out.Bytes(), nil
	}
	return nil, fmt.Errorf("unknown guestinfo encoding %q", encoding)
}

// ParseCloudConfig parses userdata written by the hatchery: the
// "#cloud-config" header, then a JSON document.
func ParseCloudConfig(b []byte) (CloudInitUserdata, error) {
	var ud CloudInitUserdata
	if !bytes.HasPrefix(b, []byte(cloudConfigHeader)) {
		return ud, fmt.Errorf("userdata does not start with %q", cloudConfigHeader)
	}
	dec := json.NewDecoder(bytes.NewReader(b[len(cloudConfigHeader):]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ud); err != nil {
		return ud, fmt.Errorf("parse cloud-config: %w", err)
	}
	return ud, nil
}

// ParseCloudInitMetadata parses guestinfo.metadata written by the hatchery.
func ParseCloudInitMetadata(b []byte) (CloudInitMetadata, error) {
	var md CloudInitMetadata
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&md); err != nil {
		return md, fmt.Errorf("parse cloud-init metadata: %w", err)
	}
	if md.InstanceID == "" || md.LocalHostname == "" {
		return md, fmt.Errorf("cloud-init metadata lacks instance-id or local-hostname")
	}
	return md, nil
}
