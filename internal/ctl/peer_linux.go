package ctl

import (
	"fmt"
	"net"
	"syscall"
)

// peerOf reads the uid and pid of a unix socket's peer from the kernel
// (SO_PEERCRED): what the peer process ran as when it connected, not
// something it says.
func peerOf(c *net.UnixConn) (Peer, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("read ctl peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return Peer{}, fmt.Errorf("read ctl peer credentials: %w", err)
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("read ctl peer credentials: %w", credErr)
	}
	return Peer{UID: int(cred.Uid), PID: int(cred.Pid)}, nil
}
