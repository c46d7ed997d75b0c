//go:build !linux

package ctl

import (
	"errors"
	"net"
)

// peerOf cannot tell a peer outside Linux: every connection is refused.
func peerOf(*net.UnixConn) (Peer, error) {
	return Peer{}, errors.New("read ctl peer credentials: SO_PEERCRED is Linux only")
}
