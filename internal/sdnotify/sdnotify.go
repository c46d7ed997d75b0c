// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)) with the standard library only: each message is one
// datagram of NAME=value lines to the Unix socket named by $NOTIFY_SOCKET
// (a path, or an abstract socket written with a leading "@"), and the
// watchdog period is read from $WATCHDOG_USEC (and $WATCHDOG_PID). It owns
// no goroutine; internal/daemon decides what to send and when.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Messages of the protocol the hatchery sends.
const (
	// Ready says the service is up (Type=notify: systemctl start returns).
	Ready = "READY=1"
	// Reloading says a reload began; Ready ends it.
	Reloading = "RELOADING=1"
	// Stopping says the service is shutting down.
	Stopping = "STOPPING=1"
	// Watchdog feeds the watchdog (WatchdogSec=).
	Watchdog = "WATCHDOG=1"
)

// Status is the STATUS= message: a one-line state for `systemctl status`.
func Status(s string) string {
	return "STATUS=" + strings.ReplaceAll(s, "\n", " ")
}

// Notifier sends notifications to systemd. A nil Notifier (no
// $NOTIFY_SOCKET: not started by systemd, or not Type=notify) sends
// nothing and returns no error.
type Notifier struct {
	addr *net.UnixAddr
}

// New returns a Notifier sending to socket ($NOTIFY_SOCKET's value); nil
// when socket is empty.
func New(socket string) *Notifier {
	if socket == "" {
		return nil
	}
	name := socket
	if strings.HasPrefix(name, "@") {
		name = "\x00" + name[1:] // abstract namespace
	}
	return &Notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}
}

// FromEnv is New with $NOTIFY_SOCKET read through lookupEnv.
func FromEnv(lookupEnv func(string) (string, bool)) *Notifier {
	s, _ := lookupEnv("NOTIFY_SOCKET")
	return New(s)
}

// Send sends the messages as one datagram (one per line). A nil Notifier
// does nothing.
func (n *Notifier) Send(msgs ...string) error {
	if n == nil || len(msgs) == 0 {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(strings.Join(msgs, "\n"))); err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	return nil
}

// WatchdogInterval reads the watchdog period systemd set for this process
// (WatchdogSec=, given as $WATCHDOG_USEC): 0 when there is none, or when
// $WATCHDOG_PID names another process than pid. The watchdog must be fed
// at least every half of it (sd_watchdog_enabled(3)).
func WatchdogInterval(lookupEnv func(string) (string, bool), pid int) (time.Duration, error) {
	us, ok := lookupEnv("WATCHDOG_USEC")
	if !ok || us == "" {
		return 0, nil
	}
	if p, ok := lookupEnv("WATCHDOG_PID"); ok && p != "" && p != strconv.Itoa(pid) {
		return 0, nil
	}
	n, err := strconv.ParseUint(us, 10, 63)
	if err != nil || n == 0 {
		return 0, errors.New("WATCHDOG_USEC: want a positive number of microseconds")
	}
	return time.Duration(n) * time.Microsecond, nil
}
