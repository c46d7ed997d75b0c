package testutil

import (
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// TemplateDevices is a template's device list: a 10 GB disk (key 2000) and
// nics vmxnet3 cards (keys 4000...) on the network "template-net".
func TemplateDevices(nics int) object.VirtualDeviceList {
	l := object.VirtualDeviceList{&types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: 2000}, CapacityInKB: 10 << 20}}
	for i := 0; i < nics; i++ {
		card := &types.VirtualVmxnet3{}
		card.Key = int32(4000 + i)
		card.Backing = &types.VirtualEthernetCardNetworkBackingInfo{VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: "template-net"}}
		l = append(l, card)
	}
	return l
}
