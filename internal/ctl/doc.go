// Package ctl owns the operator's command line to a running hatchery
// (`hatchery-vsphere ctl`, docs/operations.md#ctl): the line protocol, the
// server the daemon runs on a local unix socket, and the client.
//
// The protocol is one exchange per connection: the client writes one
// Request as a JSON line, the server answers one Response as a JSON line
// and closes. A Response carries the command's human text and the same
// facts as JSON (what `ctl --json` prints), or an error.
//
// The socket is a unix socket only, never TCP: it is created with mode
// 0600 and every connection's peer is read from the kernel (SO_PEERCRED);
// a peer whose uid is neither the daemon's nor root's is refused before
// its request is read. Every command that changes something is logged in
// one line naming the peer's uid.
package ctl
