package cloudinit

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
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
	// ConfigPath holds the worker config (the CDS_CONFIG value,
	// with the worker token): readable by root only, removed by the start
	// script once read.
	ConfigPath = "/var/lib/cds-hatchery/worker-config"
	// ScriptPath is the worker script (preStartScript, PreCmd,
	// Cmd, PostCmd), run by cloud-init's runcmd in the background.
	ScriptPath = "/var/lib/cds-hatchery/worker-start.sh"
	// LogPath receives the script's output.
	LogPath = "/var/log/cds-worker.log"
)

// Metadata is guestinfo.metadata: JSON, which cloud-init reads as
// YAML.
type Metadata struct {
	InstanceID    string   `json:"instance-id"`
	LocalHostname string   `json:"local-hostname"`
	Network       *Network `json:"network,omitempty"`
}

// Network is a cloud-init network config, version 2 (netplan
// shape).
type Network struct {
	Version   int                 `json:"version"`
	Ethernets map[string]Ethernet `json:"ethernets"`
}

// Ethernet is one interface of a version 2 network config.
type Ethernet struct {
	Match       map[string]string `json:"match,omitempty"`
	DHCP4       bool              `json:"dhcp4"`
	Addresses   []string          `json:"addresses,omitempty"`
	Routes      []Route           `json:"routes,omitempty"`
	Nameservers *Nameservers      `json:"nameservers,omitempty"`
}

// Route is one route of an interface.
type Route struct {
	To  string `json:"to"`
	Via string `json:"via"`
}

// Nameservers are an interface's DNS servers.
type Nameservers struct {
	Addresses []string `json:"addresses"`
}

// Userdata is the cloud-config the hatchery writes: the
// "#cloud-config" header line, then this as JSON (valid YAML).
type Userdata struct {
	WriteFiles []File     `json:"write_files"`
	Runcmd     [][]string `json:"runcmd"`
}

// File is one write_files entry.
type File struct {
	Path        string `json:"path"`
	Permissions string `json:"permissions"`
	Content     string `json:"content"`
}

// cloudConfigHeader starts every cloud-config userdata.
const cloudConfigHeader = "#cloud-config\n"

// configEnv is the environment variable the CDS worker reads its config
// from, the one the guest-operations launch sets too (internal/vsphere,
// guest.go).
const configEnv = "CDS_CONFIG"

// Boot is what a cloud-init worker's VM is given: the worker script and
// the CDS_CONFIG value. It holds the worker token: never log it.
type Boot struct {
	// Script is the worker script: preStartScript, PreCmd, Cmd and
	// PostCmd, rendered.
	Script string
	// CDSConfig is the worker config as CDS_CONFIG carries it (base64),
	// worker token included.
	CDSConfig string
	// Windows makes the documents cloudbase-init's (cloudbaseinit.go):
	// a PowerShell userdata, metadata without network. Script is then
	// already wrapped for Windows by the caller.
	Windows bool
}

// Address is a static IP with its network settings, as the hatchery's IP
// plan leased it: the input of the network config.
type Address struct {
	// IP is the IPv4 address, without prefix.
	IP string
	// Gateway is the default route's next hop; empty for no default route.
	Gateway string
	// SubnetMask is the dotted IPv4 mask (255.255.255.0).
	SubnetMask string
	// DNS are the name servers; none for no nameservers entry.
	DNS []string
}

// NetworkConfig is the network config of the static address addr, or nil
// for no address (cloud-init then brings the first interface up with
// DHCP).
func NetworkConfig(addr *Address) (*Network, error) {
	if addr == nil {
		return nil, nil
	}
	mask := net.ParseIP(addr.SubnetMask).To4()
	if mask == nil {
		return nil, fmt.Errorf("subnet mask %q of ip %s is not an ipv4 mask", addr.SubnetMask, addr.IP)
	}
	ones, bits := net.IPMask(mask).Size()
	if bits == 0 {
		return nil, fmt.Errorf("subnet mask %q of ip %s is not a contiguous mask", addr.SubnetMask, addr.IP)
	}
	eth := Ethernet{
		// The clone's first (only configured) NIC: the guest names it
		// ens192, eth0 or enp…; vCenter assigns its MAC after the spec.
		Match:     map[string]string{"name": "e*"},
		Addresses: []string{addr.IP + "/" + strconv.Itoa(ones)},
	}
	if addr.Gateway != "" {
		eth.Routes = []Route{{To: "0.0.0.0/0", Via: addr.Gateway}}
	}
	if len(addr.DNS) > 0 {
		eth.Nameservers = &Nameservers{Addresses: addr.DNS}
	}
	return &Network{Version: 2, Ethernets: map[string]Ethernet{"nic0": eth}}, nil
}

// UserdataDocument renders the cloud-config of a worker: the config file,
// the script (which exports CDS_CONFIG from the file, removes the file and
// runs the model's commands, as the guest-operations launch does) and the
// runcmd starting it in the background.
func UserdataDocument(b Boot) ([]byte, error) {
	start := "#!/bin/sh\n" +
		configEnv + "=\"$(cat " + ConfigPath + ")\"\n" +
		"export " + configEnv + "\n" +
		"rm -f " + ConfigPath + "\n" +
		b.Script + "\n"
	ud := Userdata{
		WriteFiles: []File{
			{Path: ConfigPath, Permissions: "0600", Content: b.CDSConfig},
			{Path: ScriptPath, Permissions: "0700", Content: start},
		},
		Runcmd: [][]string{{"/bin/sh", "-c", "nohup " + ScriptPath + " >" + LogPath + " 2>&1 &"}},
	}
	body, err := json.Marshal(ud)
	if err != nil {
		return nil, fmt.Errorf("encode cloud-config: %w", err)
	}
	return append([]byte(cloudConfigHeader), body...), nil
}

// Options are the guestinfo options (extraConfig) of a worker's VM:
// metadata (instance id, hostname, network of addr) and userdata,
// gzip+base64; for a Windows boot (b.Windows) cloudbase-init's: metadata
// without network, a PowerShell userdata setting addr itself.
func Options(instanceID, hostname string, addr *Address, b Boot) ([]vctypes.Option, error) {
	var nw *Network
	var err error
	if !b.Windows {
		// cloudbase-init: the userdata sets the address (cloudbaseinit.go).
		if nw, err = NetworkConfig(addr); err != nil {
			return nil, err
		}
	}
	md, err := json.Marshal(Metadata{InstanceID: instanceID, LocalHostname: hostname, Network: nw})
	if err != nil {
		return nil, fmt.Errorf("encode cloud-init metadata of %q: %w", hostname, err)
	}
	var ud []byte
	if b.Windows {
		ud, err = WindowsUserdataDocument(b, addr)
	} else {
		ud, err = UserdataDocument(b)
	}
	if err != nil {
		return nil, fmt.Errorf("cloud-init userdata of %q: %w", hostname, err)
	}
	return []vctypes.Option{
		{Key: GuestinfoMetadata, Value: gzipBase64(md)},
		{Key: GuestinfoMetadataEncoding, Value: GuestinfoEncodingGzipBase64},
		{Key: GuestinfoUserdata, Value: gzipBase64(ud)},
		{Key: GuestinfoUserdataEncoding, Value: GuestinfoEncodingGzipBase64},
	}, nil
}

// ScrubOptions are the options whose write removes the userdata (and with
// it the worker token) from a VM: vSphere deletes an extraConfig key set
// to the empty string.
func ScrubOptions() []vctypes.Option {
	return []vctypes.Option{{Key: GuestinfoUserdata, Value: ""}, {Key: GuestinfoUserdataEncoding, Value: ""}}
}

// BlankOptions are ScrubOptions and the metadata's keys, empty: their
// write removes all of cloud-init's guestinfo from a VM.
func BlankOptions() []vctypes.Option {
	return append(ScrubOptions(), vctypes.Option{Key: GuestinfoMetadata, Value: ""}, vctypes.Option{Key: GuestinfoMetadataEncoding, Value: ""})
}

// Guestinfo is the guestinfo.* values of the extraConfig opts, by key:
// what cloud-init's VMware datasource reads.
func Guestinfo(opts []vctypes.Option) map[string]string {
	out := map[string]string{}
	for _, o := range opts {
		if strings.HasPrefix(o.Key, "guestinfo.") {
			out[o.Key] = o.Value
		}
	}
	return out
}

// gzipBase64 encodes b as GuestinfoEncodingGzipBase64.
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
func ParseCloudConfig(b []byte) (Userdata, error) {
	var ud Userdata
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

// ParseMetadata parses guestinfo.metadata written by the hatchery.
func ParseMetadata(b []byte) (Metadata, error) {
	var md Metadata
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
